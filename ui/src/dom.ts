/** Attributes and properties {@link h} knows how to set on a new element. */
export type Attrs = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

/** A child {@link h} accepts: a node, text, or nothing (skipped). */
export type Child = Node | string | number | null | undefined | false;

/**
 * Creates an HTML element: `h("button", {type: "button", onclick: stop}, "Stop")`. Keys starting with
 * `on` add event listeners; `true` sets a boolean attribute, `false`/`undefined` leaves it out.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Creates an SVG element with the given attributes and children. */
export function svg(
  tag: string,
  attrs: Record<string, string | number> = {},
  ...children: Child[]
): SVGElement {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  append(element, children);
  return element;
}

/** Appends children (text or nodes) to a parent, skipping empty ones. */
export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces every child of `parent` with `children`. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

let nextId = 0;

/**
 * A labelled form control: a `.field` block holding the `<label>` (caption + control) and, when given,
 * a hint linked to the control by `aria-describedby` (so it is not part of the control's name).
 */
export function field(caption: string, control: HTMLElement, hint?: string): HTMLElement {
  const label = h("label", {}, h("span", { class: "caption" }, caption), control);
  if (!hint) return h("div", { class: "field" }, label);
  const id = `hint-${++nextId}`;
  control.setAttribute("aria-describedby", id);
  return h("div", { class: "field" }, label, h("small", { id }, hint));
}
