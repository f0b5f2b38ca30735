// Object references (decision 0021 §4.2): detected from their first bytes, the reserved key found at any
// depth, bucket names unambiguous, object names tied to their task and step attempt.
import { describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';
import {
  ObjectRefSchema,
  bucketClient,
  encode,
  encodeMap,
  isInputObjectOf,
  isObjectRef,
  isOutputObjectOf,
  objectBucket,
  objectRef,
  objectRefsIn,
  outputObjectPrefix,
  reservedKeyPath,
} from '../src/index.js';

const SHA = 'ab'.repeat(32);

describe('isObjectRef', () => {
  it('recognises a reference from its map header and first key, fixmap or map16', () => {
    const ref = objectRef('triad_3_dev_web', 'o1/in/abc', 10, SHA);
    expect(ObjectRefSchema.parse(ref)).toEqual(ref);
    expect(isObjectRef(encode(ref))).toBe(true);
    const map16 = new Packr({ useRecords: false, variableMapSize: false }).pack(ref);
    expect(map16[0]).toBe(0xde);
    expect(isObjectRef(map16)).toBe(true);
    expect(isObjectRef(encodeMap(Object.entries(ref)))).toBe(true);
  });

  it('is false for other values: another first key, $triad later, not a map, short bytes', () => {
    expect(isObjectRef(encode({ v: 1, $triad: 'object' }))).toBe(false);
    expect(isObjectRef(encode({ orderId: 'o1', amount: 42 }))).toBe(false);
    expect(isObjectRef(encode(['$triad', 'object']))).toBe(false);
    expect(isObjectRef(encode('$triad'))).toBe(false);
    expect(isObjectRef(Uint8Array.of(0x81))).toBe(false);
    expect(isObjectRef(undefined)).toBe(false);
  });
});

describe('reservedKeyPath', () => {
  it('finds $triad in any map at any depth, and says where', () => {
    expect(reservedKeyPath({ a: 1, b: [1, { c: 2 }] })).toBeUndefined();
    expect(reservedKeyPath({ $triad: 'x' })).toBe('input');
    expect(reservedKeyPath({ items: [{}, {}, {}, { $triad: 1 }] })).toBe('input.items[3]');
    expect(reservedKeyPath({ deep: { er: { $triad: 1 } } }, 'output')).toBe('output.deep.er');
    expect(reservedKeyPath(new Map([['$triad', 1]]))).toBe('input');
    expect(reservedKeyPath('just a $triad string')).toBeUndefined();
  });
});

describe('buckets and object names', () => {
  it('names a bucket per namespace and client, unambiguously, and parses it back', () => {
    expect(objectBucket('default', 'web')).toBe('triad_7_default_web');
    // "a_b" + "c" and "a" + "b_c" would collide without the length.
    expect(objectBucket('a_b', 'c')).not.toBe(objectBucket('a', 'b_c'));
    expect(bucketClient('a_b', objectBucket('a_b', 'c'))).toBe('c');
    expect(bucketClient('a', objectBucket('a_b', 'c'))).toBeUndefined();
    expect(bucketClient('a', objectBucket('a', 'b_c'))).toBe('b_c');
  });

  it("ties an input to its task and an output to its step attempt", () => {
    expect(isInputObjectOf('o1/in/abc123', 'o1')).toBe(true);
    expect(isInputObjectOf('o1/in/abc123', 'o11')).toBe(false);
    expect(isInputObjectOf('o1/in/a/b', 'o1')).toBe(false);
    const prefix = outputObjectPrefix('o1', 'ship', 'run', 2);
    expect(prefix).toBe('o1/ship/run/2/');
    expect(isOutputObjectOf('o1/ship/run/2/xyz', prefix)).toBe(true);
    expect(isOutputObjectOf('o1/ship/run/1/xyz', prefix)).toBe(false);
    expect(outputObjectPrefix('o1', 'ship', 'run', 1, 3)).toBe('o1/ship#3/run/1/');
  });

  it('finds every reference in a value (a fan-out output array holds one per element)', () => {
    const a = objectRef('triad_1_x_y', 't/s#0/run/1/a', 1, SHA);
    const b = objectRef('triad_1_x_y', 't/s#1/run/1/b', 1, SHA);
    expect(objectRefsIn([a, { x: 1 }, b]).map((r) => r.name)).toEqual(expect.arrayContaining([a.name, b.name]));
    expect(objectRefsIn({ $triad: 'other' })).toEqual([]);
  });
});
