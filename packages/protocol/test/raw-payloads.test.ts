// Payloads carried as bytes (#27): msgpackField finds a map's field without decoding the rest, encodeMap
// embeds pre-encoded values — checked against msgpackr on random values, with a fixed seed (printed on a
// failure by fast-check; `npm run fuzz` is where random seeds run).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { z } from 'zod';
import { MAX_NESTING_DEPTH, OPAQUE_PAYLOAD_MIN_BYTES, RawMsgpack, decode, decodeWithOpaquePayload, encode, encodeMap, isAbsentValue, msgpackField, unpackTrusted } from '../src/index.js';

const SEED = 27_0001;
/** Every msgpack shape a payload can take: ints of every width, floats, strings of every length class, bins, nesting. */
const payload = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.integer(),
    fc.maxSafeInteger(),
    fc.double({ noNaN: true }),
    fc.boolean(),
    fc.constant(null),
    fc.string({ maxLength: 40 }),
    fc.string({ minLength: 256, maxLength: 300 }),
    fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
    fc.array(tie('value'), { maxLength: 20 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 20, noNullPrototype: true }),
  ),
})).value;

describe('msgpackField', () => {
  it('returns exactly the bytes of a field, for any payload beside any other fields', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), payload, { maxKeys: 20, noNullPrototype: true }), payload, (others, value) => {
        const msg = encode({ ...others, input: value });
        const raw = msgpackField(msg, 'input');
        expect(raw).toBeDefined();
        expect(unpackTrusted(raw as Uint8Array)).toEqual(unpackTrusted(encode(value)));
        expect(msgpackField(msg, 'no such key \u0000')).toBeUndefined();
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('reads maps of 16 or more pairs, non-string keys, and nothing from a value that is not a map', () => {
    const wide = Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, i]));
    expect(unpackTrusted(msgpackField(encode(wide), 'k69999') as Uint8Array)).toBe(69_999);
    const mapKeys = new Packr({ useRecords: false, mapsAsObjects: false }).pack(new Map<unknown, unknown>([[1, 'one'], [[2], 'two'], ['x', { y: 3 }]]));
    expect(unpackTrusted(msgpackField(mapKeys, 'x') as Uint8Array)).toEqual({ y: 3 });
    expect(msgpackField(encode([1, 2]), 'x')).toBeUndefined();
    expect(msgpackField(new Uint8Array(), 'x')).toBeUndefined();
    expect(() => msgpackField(encode({ x: 'abc' }).subarray(0, 4), 'x')).toThrow(RangeError);
  });
});

describe('encodeMap', () => {
  it('writes what encode() writes for the same map, with raw values embedded as they are', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), payload, { maxKeys: 40, noNullPrototype: true }), fc.boolean(), (fields, asRaw) => {
        const entries = Object.entries(fields).map(([k, v]) => [k, asRaw ? new RawMsgpack(encode(v)) : v] as const);
        expect(Buffer.from(encodeMap(entries))).toEqual(Buffer.from(encode(fields)));
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('leaves undefined values out, writes big integers as integers, and refuses a message over the limit', () => {
    expect(unpackTrusted(encodeMap([['a', undefined], ['b', 1]]))).toEqual({ b: 1 });
    expect(Buffer.from(encodeMap([['at', 1_700_000_000_000]]))).toEqual(Buffer.from(encode({ at: 1_700_000_000_000 })));
    expect(() => encodeMap([['big', new RawMsgpack(new Uint8Array(2_000))]], 1_000)).toThrow(/over the limit of 1000/);
  });
});

describe('isAbsentValue', () => {
  it('is true for what encode() writes for undefined and for no bytes, false for nil and anything else', () => {
    expect(isAbsentValue(encode(undefined))).toBe(true);
    expect(isAbsentValue(new Uint8Array())).toBe(true);
    expect(isAbsentValue(undefined)).toBe(true);
    expect(isAbsentValue(encode(null))).toBe(false);
    expect(isAbsentValue(encode({}))).toBe(false);
  });
});

describe('decodeWithOpaquePayload (decision 0025: a payload carried on, not decoded)', () => {
  const schema = z.object({ id: z.string(), payload: z.unknown().optional() }).passthrough();
  /** A value nested `levels` arrays deep around a filler big enough to take the opaque path. */
  const nested = (levels: number): unknown => {
    let v: unknown = 'x'.repeat(OPAQUE_PAYLOAD_MIN_BYTES);
    for (let i = 0; i < levels; i++) v = [v];
    return v;
  };

  it('agrees with decode() on any message: the same value less the payload, the payload as its bytes', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), payload, { maxKeys: 20, noNullPrototype: true }), payload, fc.boolean(), (others, value, big) => {
        const fields = { ...others, id: 'a', payload: big ? [value, 'y'.repeat(OPAQUE_PAYLOAD_MIN_BYTES)] : value };
        delete (fields as Record<string, unknown>)['__proto__'];
        const bytes = encode(fields);
        const whole = decode(bytes, schema, 'm');
        const o = decodeWithOpaquePayload(bytes, schema, 'm', 'payload');
        if (bytes.length < OPAQUE_PAYLOAD_MIN_BYTES) {
          expect(o).toBeUndefined();
          return;
        }
        expect(o?.ok).toBe(whole.ok);
        if (!o?.ok || !whole.ok) return;
        const { payload: _p, ...rest } = whole.value;
        // Compared as encoded: bins decode as Buffer or Uint8Array depending on the bytes they came from.
        expect(Buffer.from(encode(o.value.value)).equals(Buffer.from(encode(rest)))).toBe(true);
        expect(Buffer.from(o.value.payload).equals(Buffer.from(msgpackField(bytes, 'payload') ?? []))).toBe(true);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('keeps the nesting limit: a payload as deep as decode() allows passes, one level more is refused with the same reason', () => {
    // The message map is level 1: its payload may open MAX_NESTING_DEPTH - 1 levels.
    const ok = encode({ id: 'a', payload: nested(MAX_NESTING_DEPTH - 1) });
    const deep = encode({ id: 'a', payload: nested(MAX_NESTING_DEPTH) });
    expect(decode(ok, schema, 'm').ok).toBe(true);
    expect(decodeWithOpaquePayload(ok, schema, 'm', 'payload')?.ok).toBe(true);
    const whole = decode(deep, schema, 'm');
    const o = decodeWithOpaquePayload(deep, schema, 'm', 'payload');
    expect(whole.ok).toBe(false);
    expect(o?.ok).toBe(false);
    if (o && !o.ok && !whole.ok) expect(o.error.message).toBe(whole.error.message);
  });

  it('leaves small messages, maps of 16 fields or more, messages without the field and trailing bytes to the usual decode', () => {
    const big = 'z'.repeat(OPAQUE_PAYLOAD_MIN_BYTES);
    expect(decodeWithOpaquePayload(encode({ id: 'a', payload: 1 }), schema, 'm', 'payload')).toBeUndefined();
    expect(decodeWithOpaquePayload(encode({ id: 'a', other: big }), schema, 'm', 'payload')).toBeUndefined();
    const withTrailing = Buffer.concat([encode({ id: 'a', payload: big }), Buffer.from([0x01])]);
    expect(decodeWithOpaquePayload(withTrailing, schema, 'm', 'payload')).toBeUndefined();
    // A map16 (more than 15 fields): its count is rewritten, not its type byte.
    const many: Record<string, unknown> = { id: 'a', payload: { big } };
    for (let i = 0; i < 20; i++) many[`f${i}`] = i;
    const bytes = encode(many);
    expect(bytes[0]).toBe(0xde);
    const o = decodeWithOpaquePayload(bytes, schema, 'm', 'payload');
    expect(o?.ok).toBe(true);
    if (o?.ok) {
      expect(Object.keys(o.value.value)).toHaveLength(21);
      expect(unpackTrusted(o.value.payload)).toEqual({ big });
    }
  });
});
