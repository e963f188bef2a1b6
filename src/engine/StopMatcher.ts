/** What {@link StopMatcher.push} returns: text that is safe to emit and, when a stop string matched, which one. */
export type StopMatchResult = {
  /** Text that can be emitted now; it can never become part of a stop string later. */
  text: string;
  /** The stop string that ended the generation, or null while none has matched. */
  stop: string | null;
};

/**
 * Finds stop strings in streamed text without ever emitting text that a stop string later claims.
 *
 * Text is fed in arbitrary pieces (one token's text at a time). The matcher holds back the longest
 * suffix that is still a prefix of some stop string, so a stop string split across tokens is caught,
 * and the earliest match in the text wins. As vLLM's `include_stop_str_in_output`, the matched stop
 * string is dropped from the output unless `includeStopString` is set.
 */
export class StopMatcher {
  private readonly stops: readonly string[];
  private readonly includeStopString: boolean;
  private held = "";

  /**
   * @param stops stop strings; empty strings are ignored.
   * @param includeStopString keep the matched stop string at the end of the output (vLLM's
   *   `include_stop_str_in_output`). Defaults to false.
   */
  constructor(stops: readonly string[], includeStopString = false) {
    this.stops = stops.filter((stop) => stop.length > 0);
    this.includeStopString = includeStopString;
  }

  /** True when there are stop strings to look for. */
  get active(): boolean {
    return this.stops.length > 0;
  }

  /**
   * Feeds newly decoded text.
   * @returns the text that may be emitted now, and the matched stop string if one completed. After a
   *   match the caller must stop the generation; further calls are not meaningful.
   */
  push(text: string): StopMatchResult {
    if (!this.active) return { text, stop: null };
    const buffer = this.held + text;
    let bestIndex = -1;
    let bestStop: string | null = null;
    for (const stop of this.stops) {
      const index = buffer.indexOf(stop);
      if (index !== -1 && (bestIndex === -1 || index < bestIndex)) {
        bestIndex = index;
        bestStop = stop;
      }
    }
    if (bestStop !== null) {
      this.held = "";
      const end = this.includeStopString ? bestIndex + bestStop.length : bestIndex;
      return { text: buffer.slice(0, end), stop: bestStop };
    }
    const keep = this.longestStopPrefixSuffix(buffer);
    this.held = buffer.slice(buffer.length - keep);
    return { text: buffer.slice(0, buffer.length - keep), stop: null };
  }

  /** Releases the held-back text at the end of a generation that no stop string ended. */
  flush(): string {
    const text = this.held;
    this.held = "";
    return text;
  }

  /** Length of the longest suffix of `buffer` that is a proper prefix of some stop string. */
  private longestStopPrefixSuffix(buffer: string): number {
    let longest = 0;
    for (const stop of this.stops) {
      const max = Math.min(stop.length - 1, buffer.length);
      for (let length = max; length > longest; length--) {
        if (buffer.endsWith(stop.slice(0, length))) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }
}
