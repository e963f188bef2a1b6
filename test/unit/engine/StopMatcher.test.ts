import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StopMatcher } from "../../../src/engine/StopMatcher.ts";

/** Feeds pieces and returns everything emitted plus the matched stop string. */
function run(stops: string[], pieces: string[], include = false): { text: string; stop: string | null } {
  const matcher = new StopMatcher(stops, include);
  let text = "";
  for (const piece of pieces) {
    const result = matcher.push(piece);
    text += result.text;
    if (result.stop !== null) return { text, stop: result.stop };
  }
  return { text: text + matcher.flush(), stop: null };
}

describe("StopMatcher", () => {
  it("passes text through when there are no stop strings", () => {
    assert.deepEqual(run([], ["Once", " upon"]), { text: "Once upon", stop: null });
  });

  it("ends before a stop string inside one piece", () => {
    assert.deepEqual(run(["Lily"], ["named Lily. She"]), { text: "named ", stop: "Lily" });
  });

  it("catches a stop string split across pieces and never emits its start", () => {
    const matcher = new StopMatcher(["Lily"]);
    assert.deepEqual(matcher.push("named L"), { text: "named ", stop: null });
    assert.deepEqual(matcher.push("i"), { text: "", stop: null });
    assert.deepEqual(matcher.push("ly."), { text: "", stop: "Lily" });
  });

  it("releases held text that turned out not to be a stop string", () => {
    assert.deepEqual(run(["Lily"], ["a L", "ittle"]), { text: "a Little", stop: null });
  });

  it("releases held text at the end with flush", () => {
    const matcher = new StopMatcher(["\n\n"]);
    assert.deepEqual(matcher.push("end\n"), { text: "end", stop: null });
    assert.equal(matcher.flush(), "\n");
  });

  it("picks the earliest match among several stop strings", () => {
    assert.deepEqual(run(["park", "play"], ["to play in the park"]), { text: "to ", stop: "play" });
  });

  it("keeps the stop string with include_stop_str_in_output", () => {
    assert.deepEqual(run(["Lily"], ["named Li", "ly. She"], true), { text: "named Lily", stop: "Lily" });
  });

  it("handles a stop string split one character per piece", () => {
    assert.deepEqual(run(["<END>"], ["a", "<", "E", "N", "D", ">", "b"]), { text: "a", stop: "<END>" });
  });

  it("ignores empty stop strings", () => {
    assert.deepEqual(run([""], ["abc"]), { text: "abc", stop: null });
  });
});
