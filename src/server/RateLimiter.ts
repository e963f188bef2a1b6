/** The outcome of {@link RateLimiter.take}: whether the request may run, and the header values. */
export type RateDecision = {
  allowed: boolean;
  /** Requests allowed per window (`x-ratelimit-limit-requests`). */
  limit: number;
  /** Requests left right now (`x-ratelimit-remaining-requests`). */
  remaining: number;
  /** Seconds until the allowance is full again (`x-ratelimit-reset-requests`). */
  resetSeconds: number;
  /** Seconds until one request is allowed (`Retry-After` of a 429); 0 when allowed. */
  retryAfterSeconds: number;
};

type Bucket = { tokens: number; updated: number };

/**
 * A per-identity token bucket: each identity (an API key, or a client address) may burst up to
 * `requests` and regains `requests` per `windowSeconds`, continuously. This is how OpenAI describes its
 * request limits: the reset header is the time until the allowance "resets to its initial state".
 * Memory is bounded: at `maxIdentities`, full (idle) buckets are dropped, then the oldest ones.
 */
export class RateLimiter {
  readonly requests: number;
  readonly windowSeconds: number;
  private readonly perSecond: number;
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;
  private readonly maxIdentities: number;

  /**
   * @param now clock in seconds (monotonic); defaults to `performance.now() / 1000`.
   * @param maxIdentities buckets kept at most; defaults to 10,000.
   */
  constructor(requests: number, windowSeconds: number, now?: () => number, maxIdentities = 10_000) {
    this.requests = requests;
    this.windowSeconds = windowSeconds;
    this.perSecond = requests / windowSeconds;
    this.now = now ?? (() => performance.now() / 1000);
    this.maxIdentities = maxIdentities;
  }

  /** Spends one request of `identity`'s allowance if there is one. */
  take(identity: string): RateDecision {
    const now = this.now();
    let bucket = this.buckets.get(identity);
    if (bucket === undefined) {
      this.evict(now);
      bucket = { tokens: this.requests, updated: now };
      this.buckets.set(identity, bucket);
    }
    this.refill(bucket, now);
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    return {
      allowed,
      limit: this.requests,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: (this.requests - bucket.tokens) / this.perSecond,
      retryAfterSeconds: allowed ? 0 : (1 - bucket.tokens) / this.perSecond,
    };
  }

  /** Number of identities currently tracked. */
  get size(): number {
    return this.buckets.size;
  }

  private refill(bucket: Bucket, now: number): void {
    bucket.tokens = Math.min(this.requests, bucket.tokens + (now - bucket.updated) * this.perSecond);
    bucket.updated = now;
  }

  private evict(now: number): void {
    if (this.buckets.size < this.maxIdentities) return;
    for (const [identity, bucket] of this.buckets) {
      this.refill(bucket, now);
      if (bucket.tokens >= this.requests) this.buckets.delete(identity);
    }
    // Make room for a tenth of the capacity at once, so that a flood of new identities costs one sweep
    // per many insertions.
    while (this.buckets.size >= this.maxIdentities * 0.9) {
      const oldest = this.buckets.keys().next();
      if (oldest.done) break;
      this.buckets.delete(oldest.value);
    }
  }
}

/**
 * A duration as OpenAI writes `x-ratelimit-reset-requests` (Go's duration format): `20ms`, `1.5s`,
 * `6m0s`, `1h2m3s`.
 */
export function formatResetDuration(seconds: number): string {
  if (seconds <= 0) return "0s";
  if (seconds < 1) return `${Math.ceil(seconds * 1000)}ms`;
  if (seconds < 60) return `${Number(seconds.toFixed(3))}s`;
  const whole = Math.ceil(seconds);
  const hours = Math.floor(whole / 3600);
  const minutes = Math.floor((whole % 3600) / 60);
  const rest = whole % 60;
  return `${hours > 0 ? `${hours}h` : ""}${minutes}m${rest}s`;
}
