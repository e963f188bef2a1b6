/**
 * A small seeded PRNG (mulberry32, 32-bit state): the JS sampler's source of randomness, so a
 * request's draws depend only on its seed, never on other requests.
 */
export class Mulberry32 {
  private state: number;

  /** @param seed any integer; only its low 32 bits are used. */
  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** The next number in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}
