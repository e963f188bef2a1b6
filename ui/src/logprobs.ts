import { h } from "./dom.ts";

/** One generated token with its log-probability and the most likely alternatives. */
export type TokenLogprob = { token: string; logprob: number; top: { token: string; logprob: number }[] };

type ChatLogprobEntry = {
  token?: string;
  logprob?: number;
  top_logprobs?: { token?: string; logprob?: number }[];
};

/** The tokens of a streamed chat choice's `logprobs.content` (empty when absent). */
export function chatLogprobs(choice: {
  logprobs?: { content?: ChatLogprobEntry[] | null } | null;
}): TokenLogprob[] {
  return (choice.logprobs?.content ?? []).map((entry) => ({
    token: entry.token ?? "",
    logprob: entry.logprob ?? Number.NaN,
    top: (entry.top_logprobs ?? []).map((alt) => ({
      token: alt.token ?? "",
      logprob: alt.logprob ?? Number.NaN,
    })),
  }));
}

type CompletionLogprobs = {
  tokens?: string[];
  token_logprobs?: (number | null)[];
  top_logprobs?: (Record<string, number> | null)[];
};

/** The tokens of a streamed completion choice's legacy `logprobs` object (empty when absent). */
export function completionLogprobs(choice: { logprobs?: CompletionLogprobs | null }): TokenLogprob[] {
  const logprobs = choice.logprobs;
  if (!logprobs?.tokens) return [];
  return logprobs.tokens.map((token, index) => ({
    token,
    logprob: logprobs.token_logprobs?.[index] ?? Number.NaN,
    top: Object.entries(logprobs.top_logprobs?.[index] ?? {}).map(([alt, logprob]) => ({
      token: alt,
      logprob,
    })),
  }));
}

const tokenData = new WeakMap<Element, TokenLogprob>();

/** Probability class of a token: `p5` (≥ 90 %) down to `p1` (< 10 %). */
export function probabilityClass(logprob: number): string {
  const p = Math.exp(logprob);
  if (Number.isNaN(p)) return "p0";
  return p >= 0.9 ? "p5" : p >= 0.6 ? "p4" : p >= 0.3 ? "p3" : p >= 0.1 ? "p2" : "p1";
}

/** A span showing one token coloured by its probability; hovering it shows the alternatives. */
export function tokenSpan(token: TokenLogprob): HTMLSpanElement {
  const span = h("span", { class: `tok ${probabilityClass(token.logprob)}` }, token.token);
  tokenData.set(span, token);
  return span;
}

/** The legend of the probability colours. */
export function logprobLegend(): HTMLElement {
  return h(
    "p",
    { class: "legend", "aria-label": "Token probability colours" },
    "Token probability: ",
    h("span", { class: "tok p5" }, "≥ 90%"),
    h("span", { class: "tok p4" }, "≥ 60%"),
    h("span", { class: "tok p3" }, "≥ 30%"),
    h("span", { class: "tok p2" }, "≥ 10%"),
    h("span", { class: "tok p1" }, "< 10%"),
  );
}

/**
 * Shows a tooltip with a token's probability and its top alternatives when the pointer is over a
 * token span anywhere inside `container`.
 */
export function installTokenTooltip(container: HTMLElement): void {
  const tip = h("div", { class: "token-tip", role: "tooltip", hidden: true });
  document.body.append(tip);
  container.addEventListener("mouseover", (event) => {
    const target = event.target as Element;
    const token = tokenData.get(target);
    if (!token) return;
    tip.replaceChildren(
      h(
        "div",
        { class: "tip-head" },
        h("code", {}, JSON.stringify(token.token)),
        ` ${percent(token.logprob)}`,
      ),
      h(
        "table",
        {},
        ...token.top.map((alt) =>
          h(
            "tr",
            { class: alt.token === token.token ? "chosen" : "" },
            h("td", {}, h("code", {}, JSON.stringify(alt.token))),
            h("td", { class: "num" }, percent(alt.logprob)),
          ),
        ),
      ),
    );
    tip.hidden = false;
    const box = target.getBoundingClientRect();
    tip.style.left = `${Math.min(box.left + window.scrollX, window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8)}px`;
    tip.style.top = `${box.bottom + window.scrollY + 4}px`;
  });
  container.addEventListener("mouseout", (event) => {
    if (tokenData.has(event.target as Element)) tip.hidden = true;
  });
}

function percent(logprob: number): string {
  const p = Math.exp(logprob) * 100;
  return Number.isNaN(p) ? "?" : `${p >= 10 ? p.toFixed(1) : p.toPrecision(2)}%`;
}
