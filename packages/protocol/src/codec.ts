/**
 * msgpackr encoding for every message (protocol v1, docs/protocol.md): msgpack of plain maps, arrays,
 * strings, numbers, booleans and nil; integers are written as msgpack integers whatever their size
 * (timestamps included), never as floats; no extension types. No shared-structure records
 * (useRecords: false), so any process decodes any message with no prior state. Decoding untrusted
 * bytes never throws: it yields a `Decoded` that is either the validated value or a TriadError saying
 * what was wrong.
 */
import { Packr } from 'msgpackr';
import type { z } from 'zod';
import { ErrorCode, TriadError } from './errors.js';

/** NATS' default max_payload is 1 MiB; we stay under it so a message is never refused by the server. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1_000_000;

// `skipValues` (drop undefined properties, so optional fields stay absent) exists at runtime but not in
// msgpackr's type declarations.
const packrOptions = { useRecords: false, int64AsType: 'number', skipValues: [undefined] } as ConstructorParameters<typeof Packr>[0];
const packr = new Packr(packrOptions);

export type Decoded<T> = { ok: true; value: T } | { ok: false; error: TriadError };

/**
 * The value with every integer beyond 32 bits as a BigInt, which msgpackr writes as a msgpack int64 or
 * uint64 (a plain number there would be written as a float64, which a reader in a typed language
 * refuses for an integer field). Containers are copied only where something changed.
 */
export function integersAsIntegers(value: unknown): unknown {
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) && (value > 0xffff_ffff || value < -0x8000_0000) ? BigInt(value) : value;
  }
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      const w = integersAsIntegers(v);
      if (w !== v) (out ??= value.slice())[i] = w;
    }
    return out ?? value;
  }
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    let out: Record<string, unknown> | undefined;
    for (const k in value) {
      const v = (value as Record<string, unknown>)[k];
      const w = integersAsIntegers(v);
      if (w !== v) (out ??= { ...(value as Record<string, unknown>) })[k] = w;
    }
    return out ?? value;
  }
  return value;
}

/** Encodes a value; refuses (TriadError PAYLOAD_TOO_LARGE) anything over the size limit. */
export function encode(value: unknown, maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES): Uint8Array {
  const bytes = packr.pack(integersAsIntegers(value));
  if (bytes.length > maxBytes) {
    throw new TriadError(
      ErrorCode.PayloadTooLarge,
      `message is ${bytes.length} bytes, over the limit of ${maxBytes}: keep inputs and outputs small and pass large data by reference (a URL or a key)`,
    );
  }
  return bytes;
}

/** Decodes and validates untrusted bytes against a schema. Never throws. */
export function decode<S extends z.ZodType>(
  bytes: Uint8Array,
  schema: S,
  what: string,
  maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
): Decoded<z.output<S>> {
  if (bytes.length > maxBytes) {
    return {
      ok: false,
      error: new TriadError(ErrorCode.PayloadTooLarge, `${what} is ${bytes.length} bytes, over the limit of ${maxBytes}`),
    };
  }
  const raw = unpackUntrusted(bytes, what);
  return raw.ok ? validate(raw.value, schema, what) : raw;
}

/**
 * How deep maps and arrays may nest in a message. Decoding and encoding recurse once per level, so a
 * deeper value would decode or not depending on the stack of the process at hand, and one that decodes
 * might not encode again (the scheduler re-encodes inputs and outputs): refused at the boundary instead.
 */
export const MAX_NESTING_DEPTH = 128;

/**
 * Unpacks untrusted bytes without validating them against a schema: the value, or a TriadError saying
 * they are not msgpack or nest deeper than MAX_NESTING_DEPTH. Never throws.
 */
export function unpackUntrusted(bytes: Uint8Array, what: string): Decoded<unknown> {
  const tooDeep = (): Decoded<unknown> => ({
    ok: false,
    error: new TriadError(ErrorCode.InvalidMessage, `${what} is nested more than ${MAX_NESTING_DEPTH} levels deep (maps and arrays); flatten it`),
  });
  let raw: unknown;
  try {
    raw = packr.unpack(bytes);
  } catch (e) {
    if (e instanceof RangeError && /call stack/i.test(e.message)) return tooDeep();
    return {
      ok: false,
      error: new TriadError(ErrorCode.InvalidMessage, `${what} is not valid msgpack (${(e as Error).message}); encode messages with @triad/protocol's encode()`, { cause: e }),
    };
  }
  return nestsDeeperThan(raw, MAX_NESTING_DEPTH) ? tooDeep() : { ok: true, value: raw };
}

/** Whether maps and arrays nest more than `limit` levels in a decoded value (a flat map is 1). Iterative. */
function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [v, depth] = next;
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v) || v instanceof Date) continue;
    if (depth > limit) return true;
    const children = Array.isArray(v) || v instanceof Set ? [...(v as Iterable<unknown>)] : v instanceof Map ? [...v.values()] : Object.values(v);
    for (const child of children) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * The most issues a rejection lists, and the longest one may be: a message with thousands of bad or
 * unknown fields still gets a reason that fits in a reply, an event and a dead letter.
 */
export const MAX_LISTED_ISSUES = 100;
export const MAX_ISSUE_CHARS = 1_000;

/** Validates an already-decoded value (e.g. CLI JSON input) with the same error shape as decode(). */
export function validate<S extends z.ZodType>(raw: unknown, schema: S, what: string): Decoded<z.output<S>> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const { issues } = parsed.error;
  const clip = (s: string): string => (s.length > MAX_ISSUE_CHARS ? `${s.slice(0, MAX_ISSUE_CHARS)}… (${s.length} characters)` : s);
  const details = issues.slice(0, MAX_LISTED_ISSUES).map((i) => clip(`${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`));
  if (issues.length > MAX_LISTED_ISSUES) details.push(`… and ${issues.length - MAX_LISTED_ISSUES} more issues`);
  return {
    ok: false,
    error: new TriadError(ErrorCode.InvalidMessage, `${what} is invalid: ${details.join('; ')}`, { details }),
  };
}

/** Like decode(), but throws the TriadError: for trusted paths where a bad value is a bug. */
export function decodeOrThrow<S extends z.ZodType>(bytes: Uint8Array, schema: S, what: string, maxBytes?: number): z.output<S> {
  const d = decode(bytes, schema, what, maxBytes);
  if (!d.ok) throw d.error;
  return d.value;
}

/** Raw msgpack decode without validation, for values the store wrote itself (step outputs, task input). */
export function unpackTrusted(bytes: Uint8Array): unknown {
  return packr.unpack(bytes);
}

/**
 * The first msgpack value of `bytes`, whatever follows it (trailing bytes make a message invalid, §1).
 * Only to find where to answer a message that is being refused — its task id, its reply subject; throws
 * if not even the first value can be read.
 */
export function unpackLeading(bytes: Uint8Array): unknown {
  let first: unknown;
  let read = false;
  packr.unpackMultiple(bytes, (value: unknown) => {
    first = value;
    read = true;
    return false;
  });
  if (!read) throw new Error('no msgpack value');
  return first;
}

/**
 * Bytes that are already one msgpack value, embedded as they are by encodeMap: a payload (a task input, a
 * step output) carried through the scheduler without being decoded and encoded again.
 */
export class RawMsgpack {
  constructor(readonly bytes: Uint8Array) {}
}

/** msgpackr's encoding of `undefined` (fixext 1, type 0), which encode() writes for an absent value. */
const UNDEFINED_BYTES = [0xd4, 0x00, 0x00];

/** Whether stored payload bytes hold no value: empty, or `undefined` as encode() writes it. */
export function isAbsentValue(bytes: Uint8Array | undefined): boolean {
  return bytes === undefined || bytes.length === 0 || (bytes.length === 3 && bytes.every((b, i) => b === UNDEFINED_BYTES[i]));
}

/**
 * Encodes a map from its entries, in order; a RawMsgpack value is written as its bytes, any other value as
 * encode() writes it (integers as integers), and an undefined one is left out. Refuses (TriadError
 * PAYLOAD_TOO_LARGE) anything over the size limit, as encode() does.
 */
export function encodeMap(entries: Iterable<readonly [string, unknown]>, maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES): Uint8Array {
  const parts: Uint8Array[] = [];
  let count = 0;
  for (const [key, value] of entries) {
    if (value === undefined) continue;
    count++;
    parts.push(packr.pack(key), value instanceof RawMsgpack ? value.bytes : packr.pack(integersAsIntegers(value)));
  }
  const header = count < 16 ? Uint8Array.of(0x80 | count) : count < 0x10000 ? Uint8Array.of(0xde, count >> 8, count & 0xff) : Uint8Array.of(0xdf, count >>> 24, (count >> 16) & 0xff, (count >> 8) & 0xff, count & 0xff);
  const size = parts.reduce((n, p) => n + p.length, header.length);
  if (size > maxBytes) {
    throw new TriadError(
      ErrorCode.PayloadTooLarge,
      `message is ${size} bytes, over the limit of ${maxBytes}: keep inputs and outputs small and pass large data by reference (a URL or a key)`,
    );
  }
  const out = Buffer.allocUnsafe(size);
  out.set(header, 0);
  let at = header.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * The bytes of the value under `key` in the msgpack map `bytes` (top level), without decoding it — a view
 * of `bytes`, not a copy; undefined when `bytes` is not a map or has no such key. For bytes that were
 * already decoded and validated (a submission, a result): it trusts their structure and throws a
 * RangeError on a truncated or malformed value rather than returning a wrong slice.
 */
export function msgpackField(bytes: Uint8Array, key: string): Uint8Array | undefined {
  const r = new MsgpackCursor(bytes);
  const pairs = r.mapHeader();
  if (pairs === undefined) return undefined;
  for (let i = 0; i < pairs; i++) {
    const k = r.stringOrSkip();
    const start = r.at;
    r.skip();
    if (k === key) return bytes.subarray(start, r.at);
  }
  return undefined;
}

/**
 * Messages at least this large are decoded with their payload left opaque (decodeWithOpaquePayload):
 * below it, the walk and the copy cost more than decoding a small payload (measured, performance.md).
 */
export const OPAQUE_PAYLOAD_MIN_BYTES = 2_048;

/**
 * Decodes and validates untrusted `bytes` like decode(), except the value under the top-level `field` —
 * a payload the reader carries on but does not read (decision 0025: a task's input, a step's output).
 * That value is checked (well-formed msgpack, nesting within MAX_NESTING_DEPTH with its message) but not
 * decoded: `value` lacks it, and `payload` is a view of its bytes. Undefined — decode the message as
 * usual — when it is under OPAQUE_PAYLOAD_MIN_BYTES or over `maxBytes`, is not one whole map, or has no
 * such field (then decoding it whole says what is wrong with it, if anything). Never throws.
 */
export function decodeWithOpaquePayload<S extends z.ZodType>(
  bytes: Uint8Array,
  schema: S,
  what: string,
  field: string,
  maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
): Decoded<{ value: z.output<S>; payload: Uint8Array }> | undefined {
  if (bytes.length < OPAQUE_PAYLOAD_MIN_BYTES || bytes.length > maxBytes) return undefined;
  const span = payloadSpan(bytes, field);
  if (!span) return undefined;
  if (span === 'too deep') {
    return { ok: false, error: new TriadError(ErrorCode.InvalidMessage, `${what} is nested more than ${MAX_NESTING_DEPTH} levels deep (maps and arrays); flatten it`) };
  }
  // The message without the payload's pair: its count one less, the pair's bytes cut out.
  const [pairStart, start, end, countAt, countLen] = span;
  const rest = new Uint8Array(bytes.length - (end - pairStart));
  rest.set(bytes.subarray(0, pairStart));
  rest.set(bytes.subarray(end), pairStart);
  if (countLen === 0) rest[0] = 0x80 | (((bytes[0] ?? 0) & 0x0f) - 1);
  else {
    let count = 0;
    for (let i = 0; i < countLen; i++) count = count * 256 + (bytes[countAt + i] ?? 0);
    count--;
    for (let i = countLen - 1; i >= 0; i--, count = Math.floor(count / 256)) rest[countAt + i] = count & 0xff;
  }
  const raw = unpackUntrusted(rest, what);
  if (!raw.ok) return raw;
  const d = validate(raw.value, schema, what);
  return d.ok ? { ok: true, value: { value: d.value, payload: bytes.subarray(start, end) } } : d;
}

/**
 * Where the value under `key` lies in the top-level map `bytes`: [pair start, value start, value end,
 * the offset and length of the map's pair count (length 0: a fixmap, the count in byte 0)], checked to
 * nest within MAX_NESTING_DEPTH (the map is level 1). Undefined when `bytes` is not one whole map with
 * that key as a string, or is malformed (the caller then decodes it whole, which says why).
 */
function payloadSpan(bytes: Uint8Array, key: string): [number, number, number, number, number] | 'too deep' | undefined {
  try {
    const r = new MsgpackCursor(bytes);
    const t = bytes[0];
    const countLen = t === 0xde ? 2 : t === 0xdf ? 4 : 0;
    const pairs = r.mapHeader();
    if (pairs === undefined) return undefined;
    let found: [number, number, number, number, number] | undefined;
    for (let i = 0; i < pairs; i++) {
      const pairStart = r.at;
      const k = r.stringOrSkip();
      const start = r.at;
      if (!r.skipWithin(MAX_NESTING_DEPTH - 1)) return 'too deep';
      if (k === key && !found) found = [pairStart, start, r.at, 1, countLen];
    }
    // Trailing bytes: not one whole message (decoding it whole refuses it with the reason).
    return r.at === bytes.length ? found : undefined;
  } catch {
    return undefined;
  }
}

const utf8 = new TextDecoder();

/** Walks msgpack bytes value by value: enough to find a map's field without decoding the rest. */
class MsgpackCursor {
  at = 0;
  constructor(private readonly b: Uint8Array) {}

  private byte(): number {
    const v = this.b[this.at];
    if (v === undefined) throw new RangeError(`msgpack value truncated at byte ${this.at}`);
    this.at++;
    return v;
  }

  private uint(n: 1 | 2 | 4): number {
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 256 + this.byte();
    return v;
  }

  private advance(n: number): void {
    if (this.at + n > this.b.length) throw new RangeError(`msgpack value truncated at byte ${this.at}`);
    this.at += n;
  }

  /** A map's pair count, or undefined (cursor unmoved) when the value here is not a map. */
  mapHeader(): number | undefined {
    const t = this.b[this.at];
    if (t === undefined) return undefined;
    if (!((t >= 0x80 && t <= 0x8f) || t === 0xde || t === 0xdf)) return undefined;
    this.at++;
    return t === 0xde ? this.uint(2) : t === 0xdf ? this.uint(4) : t & 0x0f;
  }

  /** The string here (and moves past it), or skips a value of another type and returns undefined. */
  stringOrSkip(): string | undefined {
    const t = this.b[this.at];
    const fix = t !== undefined && t >= 0xa0 && t <= 0xbf;
    if (!fix && t !== 0xd9 && t !== 0xda && t !== 0xdb) {
      this.skip();
      return undefined;
    }
    this.at++;
    const len = fix ? t & 0x1f : this.uint(t === 0xd9 ? 1 : t === 0xda ? 2 : 4);
    const start = this.at;
    this.advance(len);
    return utf8.decode(this.b.subarray(start, this.at));
  }

  /**
   * Moves past one whole value like skip(), and says whether its maps and arrays nest at most `levels`
   * deep (a scalar is 0, a flat map 1). Iterative: a stack of the containers' remaining items.
   */
  skipWithin(levels: number): boolean {
    const open: number[] = [];
    let pending = 1;
    for (;;) {
      while (pending === 0) {
        const outer = open.pop();
        if (outer === undefined) return true;
        pending = outer;
      }
      pending--;
      const before = this.at;
      const t = this.b[before];
      const container = t !== undefined && ((t >= 0x80 && t <= 0x9f) || (t >= 0xdc && t <= 0xdf));
      if (!container) {
        this.skip();
        continue;
      }
      this.at++;
      let items: number;
      if (t <= 0x8f) items = 2 * (t & 0x0f);
      else if (t <= 0x9f) items = t & 0x0f;
      else if (t === 0xdc) items = this.uint(2);
      else if (t === 0xdd) items = this.uint(4);
      else if (t === 0xde) items = 2 * this.uint(2);
      else items = 2 * this.uint(4);
      if (open.length + 1 > levels) return false;
      open.push(pending);
      pending = items;
    }
  }

  /** Moves past one whole value (containers included), iteratively. */
  skip(): void {
    for (let pending = 1; pending > 0; pending--) {
      const t = this.byte();
      if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) continue;
      if (t <= 0x8f) pending += 2 * (t & 0x0f);
      else if (t <= 0x9f) pending += t & 0x0f;
      else if (t <= 0xbf) this.advance(t & 0x1f);
      else
        switch (t) {
          case 0xc4: this.advance(this.uint(1)); break;
          case 0xc5: this.advance(this.uint(2)); break;
          case 0xc6: this.advance(this.uint(4)); break;
          case 0xc7: this.advance(this.uint(1) + 1); break;
          case 0xc8: this.advance(this.uint(2) + 1); break;
          case 0xc9: this.advance(this.uint(4) + 1); break;
          case 0xca: this.advance(4); break;
          case 0xcb: this.advance(8); break;
          case 0xcc: case 0xd0: this.advance(1); break;
          case 0xcd: case 0xd1: this.advance(2); break;
          case 0xce: case 0xd2: this.advance(4); break;
          case 0xcf: case 0xd3: this.advance(8); break;
          case 0xd4: this.advance(2); break;
          case 0xd5: this.advance(3); break;
          case 0xd6: this.advance(5); break;
          case 0xd7: this.advance(9); break;
          case 0xd8: this.advance(17); break;
          case 0xd9: this.advance(this.uint(1)); break;
          case 0xda: this.advance(this.uint(2)); break;
          case 0xdb: this.advance(this.uint(4)); break;
          case 0xdc: pending += this.uint(2); break;
          case 0xdd: pending += this.uint(4); break;
          case 0xde: pending += 2 * this.uint(2); break;
          case 0xdf: pending += 2 * this.uint(4); break;
          default: throw new RangeError(`byte 0x${t.toString(16)} at ${this.at - 1} starts no msgpack value`);
        }
    }
  }
}
