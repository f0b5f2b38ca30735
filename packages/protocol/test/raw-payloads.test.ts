// Payloads carried as bytes (#27): msgpackField finds a map's field without decoding the rest, encodeMap
// embeds pre-encoded values — checked against msgpackr on random values, with a fixed seed (printed on a
// failure by fast-check; `npm run fuzz` is where random seeds run).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { RawMsgpack, encode, encodeMap, isAbsentValue, msgpackField, unpackTrusted } from '../src/index.js';

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
