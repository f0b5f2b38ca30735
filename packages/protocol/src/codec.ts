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
  let raw: unknown;
  try {
    raw = packr.unpack(bytes);
  } catch (e) {
    return {
      ok: false,
      error: new TriadError(ErrorCode.InvalidMessage, `${what} is not valid msgpack (${(e as Error).message}); encode messages with @triad/protocol's encode()`, { cause: e }),
    };
  }
  return validate(raw, schema, what);
}

/** Validates an already-decoded value (e.g. CLI JSON input) with the same error shape as decode(). */
export function validate<S extends z.ZodType>(raw: unknown, schema: S, what: string): Decoded<z.output<S>> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const details = parsed.error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`);
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
