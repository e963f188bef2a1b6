import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatResetDuration, RateLimiter } from "../../../src/server/RateLimiter.ts";

describe("RateLimiter", () => {
  it("allows a burst of N, then refuses until the allowance refills", () => {
    let now = 0;
    const limiter = new RateLimiter(3, 60, () => now);
    const decisions = [1, 2, 3, 4].map(() => limiter.take("key"));
    assert.deepEqual(
      decisions.map((d) => [d.allowed, d.remaining]),
      [
        [true, 2],
        [true, 1],
        [true, 0],
        [false, 0],
      ],
    );
    assert.equal(decisions[3]?.retryAfterSeconds, 20, "one request regained every 60/3 s");
    assert.equal(decisions[3]?.resetSeconds, 60, "full again after the whole window");
    now = 20;
    assert.equal(limiter.take("key").allowed, true);
    assert.equal(limiter.take("key").allowed, false);
  });

  it("keeps identities apart", () => {
    const limiter = new RateLimiter(1, 1, () => 0);
    assert.equal(limiter.take("a").allowed, true);
    assert.equal(limiter.take("a").allowed, false);
    assert.equal(limiter.take("b").allowed, true);
  });

  it("bounds its memory, dropping full buckets first", () => {
    let now = 0;
    const limiter = new RateLimiter(2, 1, () => now, 100);
    for (let i = 0; i < 1000; i++) limiter.take(`client-${i}`);
    assert.ok(limiter.size <= 100, `size ${limiter.size}`);
    now = 10;
    for (let i = 0; i < 20; i++) limiter.take(`late-${i}`);
    assert.ok(limiter.size <= 20, `size ${limiter.size}: the old buckets were full again and dropped`);
    assert.equal(limiter.take("late-0").remaining, 0, "a recent identity keeps its state");
  });
});

describe("formatResetDuration", () => {
  it("writes durations as OpenAI's headers do", () => {
    assert.equal(formatResetDuration(0), "0s");
    assert.equal(formatResetDuration(0.0123), "13ms");
    assert.equal(formatResetDuration(1.5), "1.5s");
    assert.equal(formatResetDuration(17.2834), "17.283s");
    assert.equal(formatResetDuration(360), "6m0s");
    assert.equal(formatResetDuration(3723), "1h2m3s");
  });
});
