import { h, replaceChildren } from "./dom.ts";
import { type TokenLogprob, tokenSpan } from "./logprobs.ts";
import { markdownToHtml } from "./markdown.ts";
import { type ReplyResult, tokensPerSecond } from "./runStream.ts";
import type { StructuredCheck } from "./structured.ts";

/** A message in the transcript; the assistant's grows as the reply streams in. */
export type ReplyView = {
  element: HTMLElement;
  /** Adds streamed text (as coloured token spans when logprobs came with it). */
  append(text: string, tokens: TokenLogprob[]): void;
  /** Shows the reply's statistics and, for structured output, whether it is valid. */
  finish(result: ReplyResult, check: StructuredCheck | null): void;
};

/**
 * A transcript entry: `role` heading, then the text (or an empty body to stream into) and the images
 * the message carries (`data:` URLs), each shown below the text. An assistant's text is rendered as
 * Markdown (`markdown.ts`, which escapes all of it), re-rendered as it streams; a reply streamed with
 * logprobs shows its coloured token spans instead.
 */
export function replyView(role: string, text = "", images: readonly string[] = []): ReplyView {
  const markdown = role === "assistant";
  let source = text;
  let tokenView = false;
  const body = h(
    "div",
    { class: markdown ? "body markdown" : "body", "data-role": role },
    markdown ? "" : text,
  );
  // Safe: markdownToHtml escapes every character of the model's text (see markdown.ts).
  const render = () => {
    body.innerHTML = markdownToHtml(source);
  };
  if (markdown) render();
  const gallery =
    images.length === 0
      ? null
      : h(
          "div",
          { class: "message-images" },
          ...images.map((src, index) => h("img", { src, alt: `attached image ${index + 1}` })),
        );
  const footer = h("div", { class: "reply-footer" });
  const element = h(
    "article",
    { class: `message ${role}`, "aria-label": `${role} message` },
    h("h3", {}, role),
    body,
    gallery,
    footer,
  );
  if (role === "assistant" && text === "") {
    body.setAttribute("aria-live", "polite");
    body.setAttribute("aria-busy", "true");
  }
  return {
    element,
    append(delta, tokens) {
      if (markdown && !tokenView) {
        if (tokens.length === 0) {
          source += delta;
          render();
          return;
        }
        // Logprobs came: the reply is shown as token spans, after the text so far as plain text.
        tokenView = true;
        body.classList.remove("markdown");
        body.replaceChildren(source);
      }
      // Each token whose text is the next part of the delta becomes a span; tokens that add no text
      // (EOS, a partial UTF-8 character) are left out, and text no token accounts for stays plain.
      let rest = delta;
      for (const token of tokens) {
        if (token.token === "" || !rest.startsWith(token.token)) continue;
        body.append(tokenSpan(token));
        rest = rest.slice(token.token.length);
      }
      if (rest !== "") body.append(rest);
    },
    finish(result, check) {
      body.removeAttribute("aria-busy");
      replaceChildren(footer, statsList(result), check ? checkBadge(check) : null);
    },
  };
}

/** The statistics of one reply as a definition list (each value marked with `data-stat`). */
function statsList(result: ReplyResult): HTMLElement {
  const speed = tokensPerSecond(result);
  const approx = result.completionTokens === undefined;
  const entries: [string, string, string][] = [
    ["ttft", "TTFT", result.ttftMs === undefined ? "–" : `${Math.round(result.ttftMs)} ms`],
    ["speed", "Speed", speed === undefined ? "–" : `${approx ? "≈" : ""}${speed.toFixed(1)} tok/s`],
    ["prompt", "Prompt", result.promptTokens === undefined ? "–" : String(result.promptTokens)],
    ["cached", "Cached", result.cachedTokens === undefined ? "–" : String(result.cachedTokens)],
    [
      "completion",
      "Completion",
      result.completionTokens === undefined ? `≈${result.chunks}` : String(result.completionTokens),
    ],
    ["finish", "Finish", result.stopped ? "stopped by you" : (result.finishReason ?? "–")],
  ];
  return h(
    "dl",
    { class: "stats" },
    ...entries.flatMap(([key, label, value]) => [h("dt", {}, label), h("dd", { "data-stat": key }, value)]),
  );
}

function checkBadge(check: StructuredCheck): HTMLElement {
  return h(
    "p",
    { class: `check ${check.valid ? "valid" : "invalid"}`, "data-check": check.valid ? "valid" : "invalid" },
    check.valid ? "✓ " : "✗ ",
    check.message,
  );
}
