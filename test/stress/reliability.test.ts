/**
 * The reliability suite's full form (`npm run test:stress`, which sets LMSERVE_STRESS=full): 5,000+
 * fuzz cases, 200 dropped streams, three overload bursts. Skipped otherwise (`npm test` runs the
 * short form, `test/e2e/reliability.test.ts`).
 */
import { describe } from "node:test";
import { reliabilitySuite } from "./reliabilitySuite.ts";

if (process.env.LMSERVE_STRESS === "full") {
  reliabilitySuite({ form: "full", fuzz: 6000, disconnects: 200, overloadBursts: 3, seed: 7_001 });
} else {
  describe.skip("reliability (full form): set LMSERVE_STRESS=full, or run npm run test:stress", () => {});
}
