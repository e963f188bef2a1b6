/**
 * Regular languages as deterministic finite automata (DFAs) over Unicode code points, for the string
 * constraints a regex tree alone cannot state: a `pattern` intersected with `minLength`/`maxLength`, two
 * `pattern`s at once (`allOf`), a `format` with a `pattern` or lengths, the complement of a `pattern` or
 * `format` (`not`), the names `propertyNames` allows, and patterns with anchors inside or lookaheads. Built
 * from the parser's {@link RegexNode} trees by Thompson's construction and the subset construction
 * (lookaheads as obligations carried by each thread), or directly as a trie for a finite list of strings
 * ({@link stringsDfa}); intersected by the product construction; minimised by Hopcroft's algorithm (by
 * merging equal rows when acyclic); written as GBNF by `regexToGbnf.ts`.
 *
 * The alphabet is a partition of U+0000..U+10FFFF into *symbol classes* (maximal ranges no set in the
 * automaton splits), so a state's transitions are one row of class → state. Sizes are bounded
 * ({@link MAX_NFA_STATES}, {@link MAX_DFA_STATES}, {@link MAX_SUBSET_WORK}); a larger automaton throws
 * {@link AutomatonTooLarge}.
 */
import { CodePointSet, MAX_CODE_POINT } from "./codePointSet.ts";
import { ANY_TEXT, RegexError, type RegexNode } from "./regexParser.ts";

/** Most states of the intermediate NFA (a `{m,n}` repetition copies its item `n` times). */
export const MAX_NFA_STATES = 8_000;
/** Most NFA-state visits one subset construction may make (it bounds compile time, ~10 ms). */
export const MAX_SUBSET_WORK = 400_000;
/** Most states of any DFA built here (subset or product construction). */
export const MAX_DFA_STATES = 4_000;
/**
 * Most automaton work (NFA-state visits, product transitions, minimisation transitions) one compilation may
 * spend over all its automata, when run inside {@link withAutomatonBudget}: about 0.3 s here. No schema of
 * JSONSchemaBench needs more.
 */
export const MAX_COMPILE_AUTOMATON_WORK = 400_000;

/** Work left in the current compilation's budget ({@link withAutomatonBudget}); unbounded outside one. */
let workLeft = Number.POSITIVE_INFINITY;

/**
 * Runs `fn` with a budget of `work` units for every automaton it builds; past it, the automaton being built
 * throws {@link AutomatonTooLarge}. Returns `fn`'s result.
 */
export function withAutomatonBudget<T>(work: number, fn: () => T): T {
  const saved = workLeft;
  workLeft = work;
  try {
    return fn();
  } finally {
    workLeft = saved;
  }
}

/** Charges `units` of work to the current budget. Throws {@link AutomatonTooLarge} when it is spent. */
function charge(units: number): void {
  workLeft -= units;
  if (workLeft < 0) throw new AutomatonTooLarge("the schema's automata need too much work together");
}

/** Thrown when an automaton would exceed {@link MAX_NFA_STATES}, {@link MAX_DFA_STATES} or {@link MAX_SUBSET_WORK}. */
export class AutomatonTooLarge extends Error {
  constructor(what: string) {
    super(what);
    this.name = "AutomatonTooLarge";
  }
}

/**
 * A DFA over symbol classes. Class `c` is the code points `starts[c] .. starts[c + 1] - 1` (the last class
 * ends at U+10FFFF); `next[q * classes + c]` is the state after reading a code point of class `c` in state
 * `q`, or -1 (no transition: the input is rejected). State 0 is the start state. Immutable once built.
 */
export class Dfa {
  /** Number of states. */
  readonly size: number;
  /** Number of symbol classes. */
  readonly classes: number;
  /** True when this automaton came out of {@link minimize} (minimising it again returns it). */
  private minimal = false;

  constructor(
    /** First code point of each symbol class, ascending, `starts[0] = 0`. */
    readonly starts: readonly number[],
    /** Transition table, `size * classes` entries, -1 for none. */
    readonly next: Int32Array,
    /** 1 where the state accepts. */
    readonly accept: Uint8Array,
  ) {
    this.classes = starts.length;
    this.size = accept.length;
  }

  /** The code points of class `c`, as an inclusive range. */
  classRange(c: number): [number, number] {
    return [this.starts[c]!, c + 1 < this.classes ? this.starts[c + 1]! - 1 : MAX_CODE_POINT];
  }

  /** The class of code point `cp` (binary search). */
  classOf(cp: number): number {
    let lo = 0;
    let hi = this.classes - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= cp) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** True when the automaton accepts `text` (code points). */
  matches(text: string): boolean {
    let q = 0;
    for (const ch of text) {
      q = this.next[q * this.classes + this.classOf(ch.codePointAt(0)!)]!;
      if (q < 0) return false;
    }
    return this.accept[q] === 1;
  }

  /** True when no string is accepted. */
  get isEmpty(): boolean {
    return this.size === 0 || !this.accept.includes(1);
  }

  /**
   * The transitions reversed, as CSR: the sources of state `t` (once per transition) are
   * `preds[start[t] .. start[t + 1])`.
   */
  private predecessors(): { start: Int32Array; preds: Int32Array } {
    const start = new Int32Array(this.size + 1);
    for (let i = 0; i < this.next.length; i++) if (this.next[i]! >= 0) start[this.next[i]! + 1]!++;
    for (let t = 0; t < this.size; t++) start[t + 1]! += start[t]!;
    const fill = start.slice(0, this.size);
    const preds = new Int32Array(start[this.size]!);
    for (let i = 0; i < this.next.length; i++) {
      const t = this.next[i]!;
      if (t >= 0) preds[fill[t]!++] = Math.floor(i / this.classes);
    }
    return { start, preds };
  }

  /**
   * For each state, the length in code points of the shortest accepted continuation (`Infinity` when none).
   */
  distancesToAccept(): Float64Array {
    const dist = new Float64Array(this.size).fill(Number.POSITIVE_INFINITY);
    const { start, preds } = this.predecessors();
    const queue = new Int32Array(this.size);
    let tail = 0;
    for (let q = 0; q < this.size; q++) {
      if (this.accept[q] === 1) {
        dist[q] = 0;
        queue[tail++] = q;
      }
    }
    for (let head = 0; head < tail; head++) {
      const q = queue[head]!;
      for (let i = start[q]!; i < start[q + 1]!; i++) {
        const p = preds[i]!;
        if (dist[p] === Number.POSITIVE_INFINITY) {
          dist[p] = dist[q]! + 1;
          queue[tail++] = p;
        }
      }
    }
    return dist;
  }

  /**
   * The same language without useless states: only states reachable from the start and able to reach an
   * accepting state remain (renumbered in breadth-first order, start first). The empty language becomes a
   * DFA of one non-accepting state without transitions.
   */
  trim(): Dfa {
    const dist = this.distancesToAccept();
    if (dist[0] === Number.POSITIVE_INFINITY) return emptyDfa(this.starts);
    const id = new Int32Array(this.size).fill(-1);
    const order = [0];
    id[0] = 0;
    for (let i = 0; i < order.length; i++) {
      const q = order[i]!;
      for (let c = 0; c < this.classes; c++) {
        const t = this.next[q * this.classes + c]!;
        if (t >= 0 && id[t] === -1 && dist[t] !== Number.POSITIVE_INFINITY) {
          id[t] = order.length;
          order.push(t);
        }
      }
    }
    const next = new Int32Array(order.length * this.classes).fill(-1);
    const accept = new Uint8Array(order.length);
    order.forEach((q, i) => {
      accept[i] = this.accept[q]!;
      for (let c = 0; c < this.classes; c++) {
        const t = this.next[q * this.classes + c]!;
        if (t >= 0 && id[t]! >= 0) next[i * this.classes + c] = id[t]!;
      }
    });
    return new Dfa(this.starts, next, accept);
  }

  /**
   * The minimal DFA of the same language, trimmed (this automaton itself when it is known to be minimal).
   * An acyclic automaton (a finite language) is minimised by merging states with equal rows from the last
   * state back (linear time); others by Hopcroft's partition refinement over the symbol classes, with the
   * missing transitions going to an implicit dead state.
   */
  minimize(): Dfa {
    if (this.minimal) return this;
    const trimmed = this.trim();
    charge(trimmed.size * trimmed.classes);
    const order = trimmed.reverseTopologicalOrder();
    const out = order !== null ? trimmed.mergeAcyclic(order) : trimmed.hopcroft();
    out.minimal = true;
    return out;
  }

  /**
   * The states of this trimmed automaton, each after every state it reaches, or null when it has a cycle
   * (Kahn's algorithm on the reversed edges: a state comes once all its successors have).
   */
  private reverseTopologicalOrder(): Int32Array | null {
    const pending = new Int32Array(this.size); // successors (with multiplicity) not yet placed
    for (let i = 0; i < this.next.length; i++)
      if (this.next[i]! >= 0) pending[Math.floor(i / this.classes)]!++;
    const { start, preds } = this.predecessors();
    const order = new Int32Array(this.size);
    let tail = 0;
    for (let q = 0; q < this.size; q++) if (pending[q] === 0) order[tail++] = q;
    for (let head = 0; head < tail; head++) {
      const t = order[head]!;
      for (let i = start[t]!; i < start[t + 1]!; i++)
        if (--pending[preds[i]!]! === 0) order[tail++] = preds[i]!;
    }
    return tail === this.size ? order : null;
  }

  /**
   * The minimal automaton of this trimmed, acyclic one: states are visited after all their successors (in
   * `order`, see {@link reverseTopologicalOrder}), and
   * a state whose acceptance and transitions (to merged states) equal an earlier one's is merged into it.
   */
  private mergeAcyclic(order: Int32Array): Dfa {
    const k = this.classes;
    const merged = new Int32Array(this.size);
    const bySignature = new Map<string, number>();
    const representatives: number[] = [];
    for (const q of order) {
      let signature = this.accept[q] === 1 ? "a" : "r";
      for (let c = 0; c < k; c++) {
        const t = this.next[q * k + c]!;
        if (t >= 0) signature += `${c}:${merged[t]},`;
      }
      let id = bySignature.get(signature);
      if (id === undefined) {
        id = representatives.length;
        bySignature.set(signature, id);
        representatives.push(q);
      }
      merged[q] = id;
    }
    // The start state's class becomes state 0 (its id swapped with 0's), then `trim` numbers the states
    // breadth-first from it, as every minimised automaton is.
    const startId = merged[0]!;
    const idOf = (id: number): number => (id === startId ? 0 : id === 0 ? startId : id);
    const next = new Int32Array(representatives.length * k);
    const accept = new Uint8Array(representatives.length);
    representatives.forEach((q, id) => {
      const row = idOf(id);
      accept[row] = this.accept[q]!;
      for (let c = 0; c < k; c++) {
        const t = this.next[q * k + c]!;
        next[row * k + c] = t >= 0 ? idOf(merged[t]!) : -1;
      }
    });
    return new Dfa(this.starts, next, accept).trim();
  }

  /** Hopcroft's partition refinement (see {@link minimize}). */
  private hopcroft(): Dfa {
    const n = this.size + 1; // state `size` is the dead state
    const k = this.classes;
    const dead = this.size;
    const complete = new Int32Array(n * k).fill(dead);
    for (let i = 0; i < this.size * k; i++) if (this.next[i]! >= 0) complete[i] = this.next[i]!;
    const target = (q: number, c: number): number => complete[q * k + c]!;
    // Inverse transitions per class, as CSR: sources of (c, t) are inv[invStart[c * n + t] ..].
    const invStart = new Int32Array(k * n + 1);
    for (let q = 0; q < n; q++) for (let c = 0; c < k; c++) invStart[c * n + target(q, c) + 1]!++;
    for (let i = 0; i < k * n; i++) invStart[i + 1]! += invStart[i]!;
    const fill = invStart.slice(0, k * n);
    const inv = new Int32Array(k * n);
    for (let q = 0; q < n; q++) for (let c = 0; c < k; c++) inv[fill[c * n + target(q, c)]!++] = q;
    // Blocks: members listed contiguously in `elems`, block b spans elems[first[b] .. first[b] + count[b]).
    const elems = new Int32Array(n);
    const where = new Int32Array(n);
    const block = new Int32Array(n);
    const first: number[] = [];
    const count: number[] = [];
    const accepting: number[] = [];
    const rejecting: number[] = [];
    for (let q = 0; q < n; q++) (q < this.size && this.accept[q] === 1 ? accepting : rejecting).push(q);
    for (const members of [accepting, rejecting]) {
      if (members.length === 0) continue;
      const b = first.length;
      first.push(b === 0 ? 0 : first[b - 1]! + count[b - 1]!);
      count.push(members.length);
      members.forEach((q, i) => {
        elems[first[b]! + i] = q;
        where[q] = first[b]! + i;
        block[q] = b;
      });
    }
    const pending: number[] = []; // (block * k + class)
    const inPending = new Uint8Array((n + 1) * k);
    const push = (b: number, c: number): void => {
      const key = b * k + c;
      if (inPending[key] === 0) {
        inPending[key] = 1;
        pending.push(key);
      }
    };
    const smaller = count.length === 2 && count[1]! < count[0]! ? 1 : 0;
    for (let c = 0; c < k; c++) push(smaller, c);
    const marked = new Int32Array(n + 1); // per block: how many members are marked (moved to its front)
    const members: number[] = [];
    const touched: number[] = [];
    while (pending.length > 0) {
      const key = pending.pop()!;
      inPending[key] = 0;
      const splitter = Math.floor(key / k);
      const c = key % k;
      // A copy: marking below reorders members inside blocks, the splitter's own included.
      members.length = 0;
      for (let i = first[splitter]!; i < first[splitter]! + count[splitter]!; i++) members.push(elems[i]!);
      for (const t of members) {
        for (let i = invStart[c * n + t]!; i < invStart[c * n + t + 1]!; i++) {
          const q = inv[i]!;
          const b = block[q]!;
          const pos = where[q]!;
          const front = first[b]! + marked[b]!;
          if (pos < front) continue; // already marked
          // Swap q to the front part of its block.
          const other = elems[front]!;
          elems[front] = q;
          where[q] = front;
          elems[pos] = other;
          where[other] = pos;
          if (marked[b] === 0) touched.push(b);
          marked[b]!++;
        }
      }
      for (const b of touched) {
        const m = marked[b]!;
        marked[b] = 0;
        if (m === count[b]) continue;
        // Split: the marked front part becomes a new block.
        const nb = first.length;
        first.push(first[b]!);
        count.push(m);
        first[b] = first[b]! + m;
        count[b] = count[b]! - m;
        for (let i = first[nb]!; i < first[nb]! + m; i++) block[elems[i]!] = nb;
        for (let cc = 0; cc < k; cc++) {
          if (inPending[b * k + cc] === 1) push(nb, cc);
          else push(count[nb]! <= count[b]! ? nb : b, cc);
        }
      }
      touched.length = 0;
    }
    // Quotient automaton: the start state's block first; the dead state's block has no transitions.
    const deadBlock = block[dead]!;
    const id = new Int32Array(first.length).fill(-1);
    const order: number[] = [];
    const visit = (b: number): number => {
      if (id[b] === -1) {
        id[b] = order.length;
        order.push(b);
      }
      return id[b]!;
    };
    if (block[0] === deadBlock) return emptyDfa(this.starts);
    visit(block[0]!);
    const rows: number[] = [];
    const accept: number[] = [];
    for (let i = 0; i < order.length; i++) {
      const q = elems[first[order[i]!]!]!; // any member represents the block
      accept.push(q < this.size && this.accept[q] === 1 ? 1 : 0);
      for (let c = 0; c < k; c++) {
        const t = target(q, c);
        rows.push(block[t] === deadBlock ? -1 : visit(block[t]!));
      }
    }
    return new Dfa(this.starts, Int32Array.from(rows), Uint8Array.from(accept)).trim();
  }

  /** This automaton over a finer partition `starts` (a superset of this one's class starts). */
  refined(starts: readonly number[]): Dfa {
    if (starts.length === this.classes) return this;
    const map = starts.map((s) => this.classOf(s));
    const next = new Int32Array(this.size * starts.length);
    for (let q = 0; q < this.size; q++) {
      for (let c = 0; c < starts.length; c++)
        next[q * starts.length + c] = this.next[q * this.classes + map[c]!]!;
    }
    return new Dfa(starts, next, this.accept);
  }

  /** The strings both automata accept (product construction), trimmed. Throws {@link AutomatonTooLarge}. */
  intersect(other: Dfa): Dfa {
    const starts = mergeStarts(this.starts, other.starts);
    const a = this.refined(starts);
    const b = other.refined(starts);
    const k = starts.length;
    const ids = new Map<number, number>([[0, 0]]);
    const pairs: [number, number][] = [[0, 0]];
    const rows: number[] = [];
    for (let i = 0; i < pairs.length; i++) {
      const [p, q] = pairs[i]!;
      for (let c = 0; c < k; c++) {
        const tp = a.next[p * k + c]!;
        const tq = b.next[q * k + c]!;
        if (tp < 0 || tq < 0) {
          rows.push(-1);
          continue;
        }
        const key = tp * b.size + tq;
        let id = ids.get(key);
        if (id === undefined) {
          id = pairs.length;
          if (id >= MAX_DFA_STATES) throw new AutomatonTooLarge(`more than ${MAX_DFA_STATES} states`);
          ids.set(key, id);
          pairs.push([tp, tq]);
        }
        rows.push(id);
      }
    }
    charge(rows.length);
    const accept = Uint8Array.from(pairs, ([p, q]) => (a.accept[p]! & b.accept[q]!) as number);
    return new Dfa(starts, Int32Array.from(rows), accept).trim();
  }

  /**
   * The strings of `universe*` this automaton rejects (complement within the strings over `universe`),
   * trimmed. Throws {@link AutomatonTooLarge}.
   */
  complement(universe: CodePointSet): Dfa {
    const starts = mergeStarts(this.starts, classStarts([universe]));
    const a = this.refined(starts);
    const k = starts.length;
    const inUniverse = starts.map((s) => universe.has(s));
    const dead = a.size;
    if (dead + 1 > MAX_DFA_STATES) throw new AutomatonTooLarge(`more than ${MAX_DFA_STATES} states`);
    const next = new Int32Array((a.size + 1) * k);
    for (let q = 0; q <= a.size; q++) {
      for (let c = 0; c < k; c++) {
        const t = q === dead ? dead : a.next[q * k + c]!;
        next[q * k + c] = inUniverse[c] ? (t < 0 ? dead : t) : -1;
      }
    }
    charge(next.length);
    const accept = new Uint8Array(a.size + 1);
    for (let q = 0; q < a.size; q++) accept[q] = a.accept[q] ? 0 : 1;
    accept[dead] = 1;
    return new Dfa(starts, next, accept).trim();
  }

  /**
   * The code points leading from state `q` to each target state, as sets (classes grouped by target).
   */
  transitionsOf(q: number): { set: CodePointSet; target: number }[] {
    const byTarget = new Map<number, [number, number][]>();
    for (let c = 0; c < this.classes; c++) {
      const t = this.next[q * this.classes + c]!;
      if (t < 0) continue;
      let ranges = byTarget.get(t);
      if (ranges === undefined) {
        ranges = [];
        byTarget.set(t, ranges);
      }
      ranges.push(this.classRange(c));
    }
    return [...byTarget].map(([target, ranges]) => ({ set: CodePointSet.of(ranges), target }));
  }
}

/**
 * The minimal DFA of exactly the strings `values`: their trie (each code point used is its own symbol
 * class), minimised (acyclic, so by merging equal rows: linear in the total length). Throws
 * {@link AutomatonTooLarge} past {@link MAX_DFA_STATES} trie nodes.
 */
export function stringsDfa(values: readonly string[]): Dfa {
  const used = new Set<number>();
  let length = 0;
  for (const value of values) {
    for (const ch of value) {
      used.add(ch.codePointAt(0)!);
      length++;
    }
  }
  const points = [...used].sort((x, y) => x - y);
  const starts = mergeStarts(
    [0],
    points.flatMap((cp) => (cp < MAX_CODE_POINT ? [cp, cp + 1] : [cp])),
  );
  const classOf = new Map<number, number>(starts.map((cp, c) => [cp, c]));
  const k = starts.length;
  const nodes = Math.min(length + 1, MAX_DFA_STATES);
  const rows = new Int32Array(nodes * k).fill(-1);
  const accept = new Uint8Array(nodes);
  let size = 1;
  for (const value of values) {
    let q = 0;
    for (const ch of value) {
      const at = q * k + classOf.get(ch.codePointAt(0)!)!;
      if (rows[at]! < 0) {
        if (size >= MAX_DFA_STATES) throw new AutomatonTooLarge(`more than ${MAX_DFA_STATES} states`);
        rows[at] = size++;
      }
      q = rows[at]!;
    }
    accept[q] = 1;
  }
  charge(size);
  return new Dfa(starts, rows.subarray(0, size * k), accept.subarray(0, size)).minimize();
}

/** A DFA with no accepted string over the partition `starts`. */
function emptyDfa(starts: readonly number[]): Dfa {
  return new Dfa(starts, new Int32Array(starts.length).fill(-1), new Uint8Array(1));
}

/** The union of two ascending class-start lists. */
function mergeStarts(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const x = j >= b.length || (i < a.length && a[i]! <= b[j]!) ? a[i++]! : b[j++]!;
    if (out.length === 0 || out[out.length - 1] !== x) out.push(x);
  }
  return out;
}

/** The class starts of the coarsest partition of U+0000..U+10FFFF that no set in `sets` splits. */
function classStarts(sets: readonly CodePointSet[]): number[] {
  const bounds = new Set<number>([0]);
  for (const set of sets) {
    for (const [low, high] of set.ranges) {
      bounds.add(low);
      if (high < MAX_CODE_POINT) bounds.add(high + 1);
    }
  }
  return [...bounds].sort((x, y) => x - y);
}

/** Every code-point set in a regex tree, lookaheads included. */
function setsOf(node: RegexNode, out: CodePointSet[]): CodePointSet[] {
  if (node.type === "set") out.push(node.set);
  else if (node.type === "seq" || node.type === "alt") for (const item of node.items) setsOf(item, out);
  else if (node.type === "repeat" || node.type === "look") setsOf(node.item, out);
  return out;
}

/** True when `node` contains a `^` anchor (one inside a lookahead holds only where the lookahead stands). */
function hasStartAnchor(node: RegexNode): boolean {
  if (node.type === "start") return true;
  if (node.type === "seq" || node.type === "alt") return node.items.some(hasStartAnchor);
  if (node.type === "repeat" || node.type === "look") return hasStartAnchor(node.item);
  return false;
}

/**
 * A lookahead compiled for the subset construction: the DFA the rest of the input must be accepted by (its
 * item followed by any text, complemented for `(?!...)`), over the main automaton's symbol classes.
 */
type Obligation = {
  dfa: Dfa;
  /** The obligation's class for each of the main automaton's classes. */
  classOf: Int32Array;
  /** Per state: 1 when it accepts every continuation (the obligation is met and can be dropped). */
  universal: Uint8Array;
};

/** The states of `dfa` that accept every continuation over all code points. */
function universalStates(dfa: Dfa): Uint8Array {
  const out = new Uint8Array(dfa.size);
  for (let q = 0; q < dfa.size; q++) {
    if (dfa.accept[q] !== 1) continue;
    let all = true;
    for (let c = 0; c < dfa.classes && all; c++) all = dfa.next[q * dfa.classes + c] === q;
    out[q] = all ? 1 : 0;
  }
  return out;
}

/**
 * A Thompson NFA under construction: plain ε-edges, ε-edges that hold only at the start (`^`) or only at the
 * end (`$`) of the input, lookahead edges (ε-edges adding an obligation on the rest of the input), and
 * class-set edges.
 */
class Nfa {
  readonly eps: number[][] = [];
  readonly startEps: number[][] = [];
  readonly endEps: number[][] = [];
  readonly looks: { obligation: number; to: number }[][] = [];
  readonly edges: { classes: number[]; to: number }[][] = [];
  /** The lookaheads' obligations, by index. */
  readonly obligations: Obligation[] = [];

  constructor(private readonly starts: readonly number[]) {}

  state(): number {
    if (this.eps.length >= MAX_NFA_STATES)
      throw new AutomatonTooLarge(`more than ${MAX_NFA_STATES} NFA states`);
    this.eps.push([]);
    this.startEps.push([]);
    this.endEps.push([]);
    this.looks.push([]);
    this.edges.push([]);
    return this.eps.length - 1;
  }

  /** The class indices a set covers (the partition never splits it). */
  private classesOf(set: CodePointSet): number[] {
    const out: number[] = [];
    for (const [low, high] of set.ranges) {
      let lo = 0;
      let hi = this.starts.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (this.starts[mid]! <= low) lo = mid;
        else hi = mid - 1;
      }
      for (let c = lo; c < this.starts.length && this.starts[c]! <= high; c++) out.push(c);
    }
    return out;
  }

  /** Adds the states of `node` between new states; returns [entry, exit]. */
  build(node: RegexNode): [number, number] {
    switch (node.type) {
      case "set": {
        const s = this.state();
        const e = this.state();
        this.edges[s]!.push({ classes: this.classesOf(node.set), to: e });
        return [s, e];
      }
      case "start":
      case "end": {
        const s = this.state();
        const e = this.state();
        (node.type === "start" ? this.startEps : this.endEps)[s]!.push(e);
        return [s, e];
      }
      case "look": {
        if (hasStartAnchor(node.item))
          throw new RegexError("unsupported", "the anchor '^' inside a lookahead", -1);
        const ahead = regexDfa({ type: "seq", items: [node.item, ANY_TEXT] });
        const dfa = (node.negate ? ahead.complement(CodePointSet.all()).minimize() : ahead).refined(
          this.starts,
        );
        const classOf = Int32Array.from(this.starts, (_, c) => c);
        this.obligations.push({ dfa, classOf, universal: universalStates(dfa) });
        const s = this.state();
        const e = this.state();
        this.looks[s]!.push({ obligation: this.obligations.length - 1, to: e });
        return [s, e];
      }
      case "seq": {
        const s = this.state();
        let end = s;
        for (const item of node.items) {
          const [a, b] = this.build(item);
          this.eps[end]!.push(a);
          end = b;
        }
        return [s, end];
      }
      case "alt": {
        const s = this.state();
        const e = this.state();
        for (const item of node.items) {
          const [a, b] = this.build(item);
          this.eps[s]!.push(a);
          this.eps[b]!.push(e);
        }
        return [s, e];
      }
      case "repeat": {
        const s = this.state();
        let end = s;
        for (let i = 0; i < node.min; i++) {
          const [a, b] = this.build(node.item);
          this.eps[end]!.push(a);
          end = b;
        }
        if (node.max === null) {
          const [a, b] = this.build(node.item);
          this.eps[end]!.push(a);
          this.eps[b]!.push(end);
          return [s, end];
        }
        const e = this.state();
        this.eps[end]!.push(e);
        for (let i = node.min; i < node.max; i++) {
          const [a, b] = this.build(node.item);
          this.eps[end]!.push(a);
          this.eps[b]!.push(e);
          end = b;
        }
        return [s, e];
      }
    }
  }
}

/**
 * A thread of the subset construction: an NFA state and the lookahead obligations it carries, each as
 * (obligation index, state of its DFA), sorted.
 */
type Thread = { q: number; duties: readonly number[] };

/** Packs an obligation index and its DFA state into one number. */
const duty = (obligation: number, state: number): number => obligation * 65_536 + state;

/**
 * The DFA of the strings `node` fully matches. Throws RegexError for `^` inside a lookahead. Anchors hold
 * where they stand (`^` only before the first code
 * point, `$` only after the last), so `(a|$)` and `x^` mean what ECMA-262 says; a lookahead `(?=X)` /
 * `(?!X)` requires the rest of the input to start (not to start) with a match of X. Throws
 * {@link AutomatonTooLarge}.
 */
export function regexDfa(node: RegexNode): Dfa {
  // The partition covers the lookaheads' sets too, so it refines their automata's partitions.
  const starts = classStarts(setsOf(node, []));
  const k = starts.length;
  const main = new Nfa(starts);
  const [entry, exit] = main.build(node);
  if (main.obligations.length === 0) return plainSubsets(main, entry, exit, starts);
  let work = 0;
  const key = (t: Thread): string => (t.duties.length === 0 ? `${t.q}` : `${t.q}:${t.duties.join(",")}`);
  /** True when every obligation accepts at the end of the input. */
  const met = (duties: readonly number[]): boolean =>
    duties.every((d) => main.obligations[Math.floor(d / 65_536)]!.dfa.accept[d % 65_536] === 1);
  /**
   * The ε-closure of `seeds`: the threads that can consume the next code point, and whether the input may
   * end here (some thread reaches the exit with its obligations met, `$` edges allowed).
   */
  const closure = (seeds: Thread[], atStart: boolean): { threads: Thread[]; accepts: boolean } => {
    const seen = new Map<string, Thread>();
    const ended = new Set<string>();
    let accepts = false;
    const visit = (t: Thread, atEnd: boolean): void => {
      if (++work > MAX_SUBSET_WORK) throw new AutomatonTooLarge("too much work for its subset construction");
      const id = key(t);
      if (atEnd) {
        if (ended.has(id)) return;
        ended.add(id);
      } else {
        if (seen.has(id)) return;
        seen.set(id, t);
      }
      if (t.q === exit && met(t.duties)) accepts = true;
      for (const to of main.eps[t.q]!) visit({ q: to, duties: t.duties }, atEnd);
      if (atStart) for (const to of main.startEps[t.q]!) visit({ q: to, duties: t.duties }, atEnd);
      for (const to of main.endEps[t.q]!) visit({ q: to, duties: t.duties }, true);
      for (const { obligation, to } of main.looks[t.q]!) {
        const o = main.obligations[obligation]!;
        if (o.dfa.isEmpty) continue;
        if (o.universal[0] === 1) visit({ q: to, duties: t.duties }, atEnd);
        else {
          const duties = [...new Set([...t.duties, duty(obligation, 0)])].sort((x, y) => x - y);
          visit({ q: to, duties }, atEnd);
        }
      }
    };
    for (const t of seeds) visit(t, false);
    const threads = [...seen.values()].filter((t) => main.edges[t.q]!.length > 0);
    return { threads, accepts };
  };
  const subsetKey = (threads: Thread[], accepts: boolean): string =>
    `${accepts ? 1 : 0}|${threads.map(key).sort().join(";")}`;
  const first = closure([{ q: entry, duties: [] }], true);
  const ids = new Map<string, number>([[subsetKey(first.threads, first.accepts), 0]]);
  const subsets = [first];
  const rows: number[] = [];
  const accept: number[] = [];
  for (let i = 0; i < subsets.length; i++) {
    const { threads, accepts } = subsets[i]!;
    accept.push(accepts ? 1 : 0);
    const moved: Thread[][] = Array.from({ length: k }, () => []);
    for (const t of threads) {
      for (const edge of main.edges[t.q]!) {
        for (const c of edge.classes) {
          let alive = true;
          const duties: number[] = [];
          for (const d of t.duties) {
            const o = main.obligations[Math.floor(d / 65_536)]!;
            const next = o.dfa.next[(d % 65_536) * o.dfa.classes + o.classOf[c]!]!;
            if (next < 0) {
              alive = false;
              break;
            }
            if (o.universal[next] !== 1) duties.push(duty(Math.floor(d / 65_536), next));
          }
          if (alive) moved[c]!.push({ q: edge.to, duties });
        }
      }
    }
    appendRow(
      rows,
      moved,
      (seeds) => seeds.map(key).join(";"),
      (seeds) => {
        const next = closure(seeds, false);
        if (next.threads.length === 0 && !next.accepts) return -1;
        return internSubset(ids, subsets, subsetKey(next.threads, next.accepts), next);
      },
    );
  }
  charge(work + rows.length);
  return new Dfa(starts, Int32Array.from(rows), Uint8Array.from(accept)).minimize();
}

/**
 * The subset construction for an NFA without lookaheads (the common case, kept fast): subsets are sorted
 * state lists, closures use a visit stamp instead of sets. Anchors as in {@link regexDfa}.
 */
function plainSubsets(nfa: Nfa, entry: number, exit: number, starts: readonly number[]): Dfa {
  const k = starts.length;
  const n = nfa.eps.length;
  const stamp = new Int32Array(n);
  const endStamp = new Int32Array(n);
  let round = 0;
  let work = 0;
  const stack: number[] = [];
  /** The closure of `seeds` (consuming states only, sorted) and whether the input may end here. */
  const closure = (seeds: Iterable<number>, atStart: boolean): { states: number[]; accepts: boolean } => {
    round++;
    const states: number[] = [];
    let accepts = false;
    const ending: number[] = [];
    for (const q of seeds) {
      if (stamp[q] !== round) {
        stamp[q] = round;
        stack.push(q);
      }
    }
    while (stack.length > 0) {
      const q = stack.pop()!;
      if (++work > MAX_SUBSET_WORK) throw new AutomatonTooLarge("too much work for its subset construction");
      if (q === exit) accepts = true;
      if (nfa.edges[q]!.length > 0) states.push(q);
      if (nfa.endEps[q]!.length > 0) ending.push(q);
      pushUnvisited(nfa.eps[q]!, stamp, round, stack);
      if (atStart) pushUnvisited(nfa.startEps[q]!, stamp, round, stack);
    }
    // After a `$`, nothing more is read: only ε-moves (and further anchors) may still reach the exit.
    if (!accepts && ending.length > 0) {
      for (const q of ending) pushUnvisited(nfa.endEps[q]!, endStamp, round, stack);
      while (stack.length > 0) {
        const q = stack.pop()!;
        if (q === exit) accepts = true;
        pushUnvisited(nfa.eps[q]!, endStamp, round, stack);
        pushUnvisited(nfa.endEps[q]!, endStamp, round, stack);
        if (atStart) pushUnvisited(nfa.startEps[q]!, endStamp, round, stack);
      }
    }
    // A subset holding a universal state reads every continuation: that state alone stands for it.
    for (const q of states) if (universal[q] === 1) return { states: [q], accepts };
    states.sort((x, y) => x - y);
    return { states, accepts };
  };
  // Universal states: consuming states whose one edge reads every class into a closure that accepts and
  // holds them again (the tail `[\s\S]*` of a search), so every string is read from them. Found before the
  // construction; the subsets that hold one would otherwise keep every other thread alive for nothing.
  const universal = new Uint8Array(n);
  for (let q = 0; q < n; q++) {
    const edges = nfa.edges[q]!;
    if (edges.length !== 1 || edges[0]!.classes.length !== k) continue;
    const after = closure([edges[0]!.to], false);
    if (after.accepts && after.states.includes(q)) universal[q] = 1;
  }
  const keyOf = (c: { states: number[]; accepts: boolean }): string =>
    `${c.accepts ? 1 : 0}|${c.states.join(",")}`;
  const first = closure([entry], true);
  const ids = new Map<string, number>([[keyOf(first), 0]]);
  const subsets = [first];
  const rows: number[] = [];
  const accept: number[] = [];
  const targets: number[][] = Array.from({ length: k }, () => []);
  for (let i = 0; i < subsets.length; i++) {
    const { states, accepts } = subsets[i]!;
    accept.push(accepts ? 1 : 0);
    for (const q of states)
      for (const edge of nfa.edges[q]!) for (const c of edge.classes) targets[c]!.push(edge.to);
    appendRow(
      rows,
      targets,
      (seeds) => seeds.join(","),
      (seeds) => {
        const next = closure(seeds, false);
        return next.states.length === 0 && !next.accepts ? -1 : internSubset(ids, subsets, keyOf(next), next);
      },
    );
    for (const t of targets) t.length = 0;
  }
  charge(work + rows.length);
  return new Dfa(starts, Int32Array.from(rows), Uint8Array.from(accept)).minimize();
}

/**
 * Pushes onto `stack` the states of `targets` not stamped with `round` yet, stamping them (a plain function:
 * the closure walk calls it for every state it visits, and tsx names every closure it creates).
 */
function pushUnvisited(targets: readonly number[], stamp: Int32Array, round: number, stack: number[]): void {
  for (const to of targets) {
    if (stamp[to] !== round) {
      stamp[to] = round;
      stack.push(to);
    }
  }
}

/**
 * Appends to `rows` one DFA state's successor per symbol class: -1 where `moved[c]` (what a code point of
 * class c reaches: NFA states or threads) is empty, else `successor` of it (-1 for a dead subset). Equal move
 * lists (by `rawKey`) share one closure.
 */
function appendRow<T>(
  rows: number[],
  moved: readonly T[][],
  rawKey: (seeds: T[]) => string,
  successor: (seeds: T[]) => number,
): void {
  const byRaw = new Map<string, number>();
  for (const seeds of moved) {
    if (seeds.length === 0) {
      rows.push(-1);
      continue;
    }
    const raw = rawKey(seeds);
    let id = byRaw.get(raw);
    if (id === undefined) {
      id = successor(seeds);
      byRaw.set(raw, id);
    }
    rows.push(id);
  }
}

/**
 * The DFA state of a subset: its number in `ids` by `key`, or a new one appended to `subsets`. Throws
 * {@link AutomatonTooLarge} past {@link MAX_DFA_STATES}.
 */
function internSubset<T>(ids: Map<string, number>, subsets: T[], key: string, subset: T): number {
  let id = ids.get(key);
  if (id === undefined) {
    id = subsets.length;
    if (id >= MAX_DFA_STATES) throw new AutomatonTooLarge(`more than ${MAX_DFA_STATES} states`);
    ids.set(key, id);
    subsets.push(subset);
  }
  return id;
}
