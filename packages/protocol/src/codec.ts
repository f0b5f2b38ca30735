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
