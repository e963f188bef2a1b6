/**
 * The reliability suite's short form, part of `npm test`: a few hundred fuzzed, dropped and
 * overloading requests against one real server. The full form (5,000+ fuzz cases, 200 disconnects,
 * a soak) is `npm run test:stress`.
 */
import { reliabilitySuite } from "../stress/reliabilitySuite.ts";

reliabilitySuite({ form: "short", fuzz: 300, disconnects: 40, overloadBursts: 1, seed: 20_240_601 });
