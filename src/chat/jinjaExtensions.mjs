// What `@huggingface/jinja` 0.5.x lacks and real chat templates use (llama.cpp's collection of 68 in
// `models/templates`), added on top of the library's own classes, once per process (or worker thread).
// Plain JavaScript so that `templateWorker.mjs` can load it without the TypeScript loader. Each addition
// follows Python's jinja2 (what transformers renders with) or, where jinja2 itself raises, llama.cpp's
// minja (what llama-server renders with, undefined-friendly):
//
// - `undefined + "text"` / `"text" + undefined`: the undefined side counts as `""` (minja; jinja2 raises,
//   but gpt-oss, Hermes 2/3, functionary v3.1, firefunction v2 and Apertus concatenate an absent tool
//   `description` and llama-server renders them).
// - `for` over `none` / undefined iterates nothing, and `for a, b in` unpacks tuples (minja); list
//   filters (`selectattr`, `map`, …) on `none` see an empty list.
// - integer keys in `{...}` literals, kept as integers by `[]`, `items()`, `keys()` and `dictsort`
//   (Python dicts; ByteDance Seed-OSS maps thinking budgets by number).
// - string filters (`trim`, `upper`, …) on an undefined value see `""`, `length` sees 0 (jinja2).
// - filters `min` / `max` on lists (jinja2), `string` on mappings (JSON text, as minja's `string`).
// - list methods `append`, `pop`, `extend`, `insert`, `index` and string `format` (Python's `str.format`
//   with positional `{}` / `{0}` fields), which templates call as Python methods.
//
// Upgrading `@huggingface/jinja` to 0.5.13 (the newest release, measured on 2026-12-03) fixes none of these.
import { Environment, Interpreter } from "@huggingface/jinja";

const probe = new Environment();
/** The library's runtime value classes (not exported), taken from values it builds. */
function classOf(value) {
  probe.set("__probe", value);
  const runtime = probe.lookupVariable("__probe");
  probe.variables.delete("__probe");
  return runtime.constructor;
}
const StringValue = classOf("");
const IntegerValue = classOf(1);
const FloatValue = classOf(1.5);
const ArrayValue = classOf([]);
const ObjectValue = classOf({ a: 1 });
const NullValue = classOf(null);
const UndefinedValue = probe.lookupVariable("__absent").constructor;
const FunctionValue = classOf(() => null);

const PRE_EVALUATED = "__PreEvaluated";
let installed = false;

/** Installs the additions above into `@huggingface/jinja`'s classes; a second call does nothing. */
export function installJinjaExtensions() {
  if (installed) return;
  installed = true;

  const plainEvaluate = Interpreter.prototype.evaluate;
  Interpreter.prototype.evaluate = function evaluate(node, environment) {
    if (node && node.type === PRE_EVALUATED) return node.value;
    if (node && node.type === "ObjectLiteral") return this.evaluateMapping(node, environment);
    return plainEvaluate.call(this, node, environment);
  };

  /** A `{...}` literal whose keys may be strings or integers (as Python dicts; ByteDance Seed-OSS). */
  Interpreter.prototype.evaluateMapping = function evaluateMapping(node, environment) {
    const mapping = new Map();
    for (const [key, value] of node.value) {
      const evaluated = this.evaluate(key, environment);
      if (!(evaluated instanceof StringValue || evaluated instanceof IntegerValue)) {
        throw new Error(`Object keys must be strings or integers: got ${evaluated.type}`);
      }
      mapping.set(evaluated.value, this.evaluate(value, environment));
    }
    return new ObjectValue(mapping);
  };

  const plainMember = Interpreter.prototype.evaluateMemberExpression;
  Interpreter.prototype.evaluateMemberExpression = function evaluateMemberExpression(node, environment) {
    if (!node.computed || node.property.type === "SliceExpression")
      return plainMember.call(this, node, environment);
    const object = this.evaluate(node.object, environment);
    const property = this.evaluate(node.property, environment);
    if (object instanceof ObjectValue && property instanceof IntegerValue) {
      return object.value.get(property.value) ?? new UndefinedValue();
    }
    return plainMember.call(
      this,
      {
        ...node,
        object: { type: PRE_EVALUATED, value: object },
        property: { type: PRE_EVALUATED, value: property },
      },
      environment,
    );
  };

  // An integer key stays an integer in `items()`, `keys()` and `dictsort` (the library wraps every key
  // in a string value).
  const plainItems = ObjectValue.prototype.items;
  ObjectValue.prototype.items = function items() {
    return integerKeys(plainItems.call(this));
  };
  const plainKeys = ObjectValue.prototype.keys;
  ObjectValue.prototype.keys = function keys() {
    return new ArrayValue(plainKeys.call(this).value.map(integerKey));
  };
  const builtins = Object.getOwnPropertyDescriptor(ObjectValue.prototype, "builtins");
  if (builtins?.get) {
    const plainGet = builtins.get;
    Object.defineProperty(ObjectValue.prototype, "builtins", {
      configurable: true,
      get() {
        const map = plainGet.call(this);
        const dictsort = map.get("dictsort");
        if (dictsort instanceof FunctionValue && !dictsort.integerKeys) {
          const sorted = new FunctionValue((args, env) =>
            [...this.value.keys()].some((key) => typeof key === "number")
              ? dictsortMixed(this, args)
              : dictsort.value(args, env),
          );
          sorted.integerKeys = true;
          map.set("dictsort", sorted);
        }
        return map;
      },
    });
  }

  const plainBinary = Interpreter.prototype.evaluateBinaryExpression;
  Interpreter.prototype.evaluateBinaryExpression = function evaluateBinaryExpression(node, environment) {
    const operator = node.operator.value;
    if (operator !== "+" && operator !== "~") return plainBinary.call(this, node, environment);
    const left = this.evaluate(node.left, environment);
    const right = this.evaluate(node.right, environment);
    const leftUndefined = left instanceof UndefinedValue;
    const rightUndefined = right instanceof UndefinedValue;
    if (leftUndefined && (rightUndefined || right instanceof StringValue)) {
      return rightUndefined ? new StringValue("") : right;
    }
    if (rightUndefined && left instanceof StringValue) return left;
    return plainBinary.call(
      this,
      {
        ...node,
        left: { type: PRE_EVALUATED, value: left },
        right: { type: PRE_EVALUATED, value: right },
      },
      environment,
    );
  };

  const plainFor = Interpreter.prototype.evaluateFor;
  Interpreter.prototype.evaluateFor = function evaluateFor(node, environment) {
    const select = node.iterable.type === "SelectExpression" ? node.iterable : undefined;
    const iterable = loopable(this.evaluate(select ? select.lhs : node.iterable, environment));
    const pre = { type: PRE_EVALUATED, value: iterable };
    return plainFor.call(this, { ...node, iterable: select ? { ...select, lhs: pre } : pre }, environment);
  };

  const plainFilter = Interpreter.prototype.applyFilter;
  Interpreter.prototype.applyFilter = function applyFilter(operand, filterNode, environment) {
    const absent = operand instanceof NullValue || operand instanceof UndefinedValue;
    if (absent && filterNode.type === "CallExpression" && LIST_FILTERS.has(filterNode.callee.value)) {
      return plainFilter.call(this, new ArrayValue([]), filterNode, environment);
    }
    if (filterNode.type === "Identifier") {
      const name = filterNode.value;
      if ((name === "min" || name === "max") && operand instanceof ArrayValue) {
        return extreme(operand.value, name === "min");
      }
      if (operand instanceof UndefinedValue && STRING_FILTERS.has(name)) {
        return plainFilter.call(this, new StringValue(""), filterNode, environment);
      }
      if (operand instanceof UndefinedValue && name === "length") return new IntegerValue(0);
      if (name === "string" && operand instanceof ObjectValue) return new StringValue(operand.toString());
    }
    return plainFilter.call(this, operand, filterNode, environment);
  };

  extendBuiltins(ArrayValue, (array) => [
    [
      "append",
      (item) => {
        array.value.push(item);
        return new NullValue();
      },
    ],
    [
      "extend",
      (items) => {
        array.value.push(...(items?.value ?? []));
        return new NullValue();
      },
    ],
    [
      "insert",
      (at, item) => {
        array.value.splice(at.value, 0, item);
        return new NullValue();
      },
    ],
    [
      "pop",
      (at) => {
        if (array.value.length === 0) throw new Error("pop from empty list");
        const index = at === undefined ? array.value.length - 1 : at.value;
        return array.value.splice(index < 0 ? array.value.length + index : index, 1)[0];
      },
    ],
    [
      "index",
      (item) => {
        const found = array.value.findIndex((x) => x.value === item.value);
        if (found < 0) throw new Error("value is not in list");
        return new IntegerValue(found);
      },
    ],
  ]);
  extendBuiltins(StringValue, (string) => [
    ["format", (...args) => new StringValue(pyFormat(string.value, args))],
  ]);
}

/** A key the library wrapped as a string value although it is a number, as an integer value. */
function integerKey(key) {
  return key instanceof StringValue && typeof key.value === "number" ? new IntegerValue(key.value) : key;
}

/** `[key, value]` pairs with {@link integerKey} applied to each key. */
function integerKeys(pairs) {
  return new ArrayValue(
    pairs.value.map((pair) => new ArrayValue([integerKey(pair.value[0]), pair.value[1]])),
  );
}

/**
 * jinja2's `dictsort(case_sensitive=False, by="key", reverse=False)` for a mapping with integer keys
 * (positional or keyword arguments); numbers sort numerically, strings case-insensitively unless asked.
 */
function dictsortMixed(object, args) {
  const keyword = args.find((arg) => arg instanceof ObjectValue && arg.constructor !== ObjectValue);
  const positional = args.filter((arg) => arg !== keyword);
  const option = (at, name, fallback) => (positional[at] ?? keyword?.value.get(name))?.value ?? fallback;
  const caseSensitive = option(0, "case_sensitive", false);
  const index = option(1, "by", "key") === "value" ? 1 : 0;
  const reverse = option(2, "reverse", false);
  const comparable = (value) =>
    typeof value.value === "string" && !caseSensitive ? value.value.toLowerCase() : value.value;
  const pairs = integerKeys(object.items()).value.slice();
  pairs.sort((a, b) => {
    const x = comparable(a.value[index]);
    const y = comparable(b.value[index]);
    const order = x < y ? -1 : x > y ? 1 : 0;
    return reverse ? -order : order;
  });
  return new ArrayValue(pairs);
}

/** Filters that, applied to an undefined value, see `""` (jinja2's `Undefined` is the empty string). */
const STRING_FILTERS = new Set(["trim", "upper", "lower", "title", "capitalize", "string"]);

/** Filters that take a list and, applied to `none` or an undefined value, see an empty one (minja). */
const LIST_FILTERS = new Set(["selectattr", "rejectattr", "select", "reject", "map"]);

/**
 * What a `for` loop iterates: `none` and undefined become an empty list (minja; jinja2 raises for
 * `none`), and a list's tuples become lists so that `for a, b in [("x", "y")]` unpacks them.
 */
function loopable(value) {
  if (value instanceof NullValue || value instanceof UndefinedValue) return new ArrayValue([]);
  if (
    value instanceof ArrayValue &&
    value.value.some((item) => item instanceof ArrayValue && item.constructor !== ArrayValue)
  ) {
    return new ArrayValue(
      value.value.map((item) => (item instanceof ArrayValue ? new ArrayValue(item.value) : item)),
    );
  }
  return value;
}

/** Adds methods to `Class`'s `builtins` map (each becomes a `FunctionValue` taking positional values). */
function extendBuiltins(Class, methodsOf) {
  const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, "builtins");
  if (!descriptor?.get) return;
  const plainGet = descriptor.get;
  Object.defineProperty(Class.prototype, "builtins", {
    configurable: true,
    get() {
      const map = plainGet.call(this);
      if (!map.has("__extended")) {
        for (const [name, method] of methodsOf(this)) {
          if (!map.has(name)) map.set(name, new FunctionValue((args) => method(...args)));
        }
        map.set("__extended", new NullValue());
      }
      return map;
    },
  });
}

/** The smallest (or largest) of a list's numbers or strings, as jinja2's `min` / `max`; undefined when empty. */
function extreme(items, smallest) {
  if (items.length === 0) return new UndefinedValue();
  let best = items[0];
  for (const item of items.slice(1)) {
    const better = smallest ? item.value < best.value : item.value > best.value;
    if (better) best = item;
  }
  return best;
}

/** Python's `str.format` for positional fields `{}` and `{N}` (`{{` / `}}` escape braces). */
function pyFormat(text, args) {
  let next = 0;
  return text.replace(/\{\{|\}\}|\{(\d*)\}/g, (match, index) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    const value = args[index === "" ? next++ : Number(index)];
    if (value === undefined) throw new Error("Replacement index out of range for positional args tuple");
    return value instanceof StringValue || value instanceof IntegerValue || value instanceof FloatValue
      ? String(value.value)
      : value.toString();
  });
}
