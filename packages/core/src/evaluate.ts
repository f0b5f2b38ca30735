/**
 * The reference evaluator of `when` conditions (decision 0019 §1.4) over decoded values: whether a
 * condition holds and, when it does not, the reason a skipped step shows. The Lua evaluator
 * (`packages/store/lua/_when.lua`, over the stored msgpack bytes) must answer exactly the same, reason
 * text included; a property test compares the two. Every rule here is therefore written so that it can
 * be done byte for byte in Lua: strings compare as UTF-8 bytes, numbers as doubles, and a number is
 * printed by a rule both sides compute exactly (`formatNumber`).
 */
import { PREDICATE_OPERATORS, type Predicate, type PredicateLeaf, type PredicateOperator, type Scalar } from '@triad/protocol';
import { inputReference, outputReference, referenceText, type Reference } from './references.js';

export interface Evaluation {
  holds: boolean;
  /** Why it does not hold (absent when it holds), at most MAX_REASON_BYTES of UTF-8. */
  reason?: string;
}

/** A reason is cut to this many bytes of UTF-8 (at a character boundary, ending "…"). */
export const MAX_REASON_BYTES = 500;
/** A string value in a reason is cut to this many bytes (at a character boundary, then "…"). */
export const MAX_SHOWN_STRING_BYTES = 60;

const SYMBOL: Partial<Record<PredicateOperator, string>> = { gt: '>', gte: '>=', lt: '<', lte: '<=' };

/**
 * Evaluates a condition. `input` is the task's decoded input (undefined: the task has none);
 * `outputs[step]` a step's decoded output (missing or undefined: it has none, e.g. it was skipped).
 */
export function evaluate(predicate: Predicate, input: unknown, outputs: Readonly<Record<string, unknown>>): Evaluation {
  const r = evaluateNode(predicate, input, outputs);
  return r.holds ? { holds: true } : { holds: false, reason: cutUtf8(r.reason ?? '', MAX_REASON_BYTES) };
}

function evaluateNode(p: Predicate, input: unknown, outputs: Readonly<Record<string, unknown>>): Evaluation {
  if ('all' in p) {
    for (const c of p.all) {
      const r = evaluateNode(c, input, outputs);
      if (!r.holds) return r;
    }
    return { holds: true };
  }
  if ('any' in p) {
    const reasons: string[] = [];
    for (const c of p.any) {
      const r = evaluateNode(c, input, outputs);
      if (r.holds) return r;
      reasons.push(r.reason ?? '');
    }
    return { holds: false, reason: `none of: ${reasons.join('; ')}` };
  }
  return evaluateLeaf(p, input, outputs);
}

/** The source of a leaf as a reference. */
export function leafReference(leaf: PredicateLeaf): Reference {
  return leaf.input !== undefined ? inputReference(leaf.input) : outputReference(leaf.output ?? '');
}

/** The one operator of a valid leaf and its operand. */
export function leafOperator(leaf: PredicateLeaf): { op: PredicateOperator; operand: unknown } {
  for (const op of PREDICATE_OPERATORS) {
    const v = (leaf as Record<string, unknown>)[op];
    if (v !== undefined) return { op, operand: v };
  }
  throw new Error('a condition without an operator (validateDefinition refuses it)');
}

type Found = { present: false } | { present: true; value: unknown };

/** Follows a reference (decision 0019 §1.3): absent as soon as a segment does not apply. */
export function resolve(ref: Reference, input: unknown, outputs: Readonly<Record<string, unknown>>): Found {
  let value: unknown;
  if (ref.step === '') value = input;
  else value = Object.hasOwn(outputs, ref.step) ? outputs[ref.step] : undefined;
  if (value === undefined) return { present: false };
  for (const seg of ref.path) {
    const c = classOf(value);
    if (c === 'array') {
      const items = value as unknown[];
      if (!/^[0-9]+$/.test(seg)) return { present: false };
      const i = Number(seg);
      if (i >= items.length) return { present: false };
      value = items[i];
    } else if (c === 'map') {
      if (value instanceof Map) {
        if (!value.has(seg)) return { present: false };
        value = value.get(seg);
      } else {
        if (!Object.hasOwn(value as object, seg)) return { present: false };
        value = (value as Record<string, unknown>)[seg];
      }
    } else return { present: false };
    if (value === undefined) return { present: false };
  }
  return { present: true, value };
}

function evaluateLeaf(leaf: PredicateLeaf, input: unknown, outputs: Readonly<Record<string, unknown>>): Evaluation {
  const ref = leafReference(leaf);
  const where = referenceText(ref);
  const { op, operand } = leafOperator(leaf);
  const found = resolve(ref, input, outputs);
  const value = found.present ? found.value : undefined;
  const isNil = found.present && classOf(value) === 'nil';
  switch (op) {
    case 'exists':
      if (operand === true) {
        if (found.present && !isNil) return { holds: true };
        return { holds: false, reason: `${where} is ${found.present ? 'null' : 'absent'}` };
      }
      if (!found.present || isNil) return { holds: true };
      return { holds: false, reason: `${where} ${render(value)} exists` };
    case 'ne':
      if (!found.present || !equal(value, operand)) return { holds: true };
      return { holds: false, reason: `${where} is ${render(operand)}` };
    default:
      break;
  }
  if (!found.present) return { holds: false, reason: `${where} is absent` };
  let holds: boolean;
  let text: string;
  if (op === 'eq') {
    holds = equal(value, operand);
    text = render(operand);
  } else if (op === 'in') {
    const list = operand as Scalar[];
    holds = list.some((o) => equal(value, o));
    text = `in [${list.map(render).join(',')}]`;
  } else {
    const c = compare(value, operand);
    holds = c !== undefined && (op === 'gt' ? c > 0 : op === 'gte' ? c >= 0 : op === 'lt' ? c < 0 : c <= 0);
    text = `${SYMBOL[op] ?? op} ${render(operand)}`;
  }
  return holds ? { holds: true } : { holds: false, reason: cutUtf8(`${where} ${render(value)} is not ${text}`, MAX_REASON_BYTES) };
}

type ValueClass = 'nil' | 'bool' | 'num' | 'str' | 'bin' | 'array' | 'map' | 'other';

/** A decoded msgpack value's kind, as the Lua locator sees the encoded one. */
function classOf(v: unknown): ValueClass {
  if (v === null) return 'nil';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number' || typeof v === 'bigint') return 'num';
  if (typeof v === 'string') return 'str';
  if (v instanceof Uint8Array) return 'bin';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Map) return 'map';
  if (typeof v === 'object' && v !== null && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) return 'map';
  return 'other';
}

/** Scalars of the same kind only: `1 eq 1.0` holds, `"1" eq 1` does not; a map, array or bin equals nothing. */
function equal(value: unknown, operand: unknown): boolean {
  const a = classOf(value);
  if (a !== classOf(operand)) return false;
  if (a === 'nil') return true;
  if (a === 'num') return Number(value) === Number(operand);
  if (a === 'bool' || a === 'str') return value === operand;
  return false;
}

/** Both numbers or both strings (compared as UTF-8 bytes); otherwise not comparable. */
function compare(value: unknown, operand: unknown): number | undefined {
  const a = classOf(value);
  if (a !== classOf(operand)) return undefined;
  if (a === 'num') {
    const x = Number(value);
    const y = Number(operand);
    if (Number.isNaN(x) || Number.isNaN(y)) return undefined;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a === 'str') return compareBytes(utf8(value as string), utf8(operand as string));
  return undefined;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const utf8 = (s: string): Uint8Array => encoder.encode(s);

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

/**
 * `s` cut to at most `max` bytes of UTF-8 at a character boundary; a cut string ends with "…" (its 3
 * bytes count). Lua cuts the same bytes (`when_cut`).
 */
export function cutUtf8(s: string, max: number, ellipsis = true): string {
  const b = utf8(s);
  if (b.length <= max) return s;
  let n = ellipsis ? max - 3 : max;
  while (n > 0 && ((b[n] as number) & 0xc0) === 0x80) n--;
  return decoder.decode(b.subarray(0, n)) + (ellipsis ? '…' : '');
}

/** A value as a reason shows it: scalars as JSON-like text, containers and bytes by their size. */
export function render(v: unknown): string {
  switch (classOf(v)) {
    case 'nil':
      return 'null';
    case 'bool':
      return v ? 'true' : 'false';
    case 'num':
      return formatNumber(Number(v));
    case 'str': {
      const s = v as string;
      const cut = cutUtf8(s, MAX_SHOWN_STRING_BYTES, false);
      return `"${escape(cut)}${cut.length < s.length ? '…' : ''}"`;
    }
    case 'bin':
      return `<${(v as Uint8Array).length} bytes>`;
    case 'array': {
      const n = (v as unknown[]).length;
      return `[${n} item${n === 1 ? '' : 's'}]`;
    }
    case 'map': {
      const n = v instanceof Map ? v.size : Object.keys(v as object).length;
      return `{${n} key${n === 1 ? '' : 's'}}`;
    }
    default:
      return '<ext>';
  }
}

/** `"` and `\` escaped with a backslash, control characters (and DEL) as \u00XX; the rest as is. */
function escape(s: string): string {
  return s.replace(/["\\\u0000-\u001f\u007f]/g, (c) => (c === '"' || c === '\\' ? `\\${c}` : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/**
 * A number as reasons print it, computed exactly so that Lua prints the same: an integer below 2^53 in
 * full; anything else as the shortest C `%.<p>g` (p = 1…17) that reads back as the same double.
 */
export function formatNumber(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return 'Infinity';
  if (v === -Infinity) return '-Infinity';
  if (Number.isInteger(v) && Math.abs(v) < 2 ** 53) return Object.is(v, -0) ? '0' : String(v);
  for (let p = 1; p <= 17; p++) {
    const s = formatG(v, p);
    if (Number(s) === v) return s;
  }
  return formatG(v, 17);
}

/** C's `%.<p>g` of a finite, non-zero double, exactly (round half to even on the exact binary value, as glibc does). */
export function formatG(v: number, p: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(v));
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & ((1n << 52n) - 1n);
  let exp2: number;
  if (biased === 0) exp2 = -1074;
  else {
    mantissa |= 1n << 52n;
    exp2 = biased - 1075;
  }
  // |v| = num / den exactly.
  let num = mantissa;
  let den = 1n;
  if (exp2 >= 0) num <<= BigInt(exp2);
  else den <<= BigInt(-exp2);
  const pow10 = (k: number): bigint => 10n ** BigInt(k);
  const atLeast = (k: number): boolean => (k >= 0 ? num >= den * pow10(k) : num * pow10(-k) >= den);
  // x = floor(log10 |v|), estimated then corrected.
  let x = Math.floor(Math.log10(Math.abs(v)));
  while (!atLeast(x)) x--;
  while (atLeast(x + 1)) x++;
  const shift = x - p + 1;
  const n = shift >= 0 ? num : num * pow10(-shift);
  const d = shift >= 0 ? den * pow10(shift) : den;
  let q = n / d;
  const r = n - q * d;
  if (2n * r > d || (2n * r === d && (q & 1n) === 1n)) q += 1n;
  if (q === pow10(p)) {
    q = pow10(p - 1);
    x += 1;
  }
  const digits = q.toString();
  const sign = v < 0 ? '-' : '';
  const trim = (s: string): string => s.replace(/0+$/, '');
  if (x < -4 || x >= p) {
    const frac = trim(digits.slice(1));
    const e = Math.abs(x);
    return `${sign}${digits[0]}${frac ? `.${frac}` : ''}e${x < 0 ? '-' : '+'}${e < 10 ? '0' : ''}${e}`;
  }
  if (x >= 0) {
    const frac = trim(digits.slice(x + 1));
    return `${sign}${digits.slice(0, x + 1)}${frac ? `.${frac}` : ''}`;
  }
  return `${sign}0.${'0'.repeat(-x - 1)}${trim(digits)}`;
}
