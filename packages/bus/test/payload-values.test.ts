// resolveRefs and offloadEncoded (decisions 0021 §4, 0025): a value without references is returned as it
// is (the same object: no copy, no await per value); references at any depth are resolved; a Triad value
// this version does not know is refused; offloadEncoded sends what offloadValue sends, encoded once.
import { describe, expect, it } from 'vitest';
import { encode, objectRef, unpackTrusted, type ObjectRef } from '@triad/protocol';
import { offloadEncoded, offloadValue, resolveRefs } from '../src/index.js';

const SHA = 'a'.repeat(64);
const ref = (name: string): ObjectRef => objectRef('triad_2_ns_alice', name, 3, SHA);

describe('resolveRefs', () => {
  it('returns a value without references as the very same object, downloading nothing', async () => {
    const value = { lines: Array.from({ length: 500 }, (_, i) => ({ sku: `s${i}`, qty: i, tags: ['a', { b: [1, 2] }], at: new Date(0), raw: Buffer.from([1]) })) };
    const downloads: string[] = [];
    expect(await resolveRefs(value, (r) => (downloads.push(r.name), Promise.resolve(encode(1))))).toBe(value);
    expect(await resolveRefs([1, undefined, null, 'x'], () => Promise.reject(new Error('no')))).toEqual([1, undefined, null, 'x']);
    expect(downloads).toEqual([]);
  });

  it('resolves references at any depth (arrays, maps, top level) and leaves the rest shared', async () => {
    const kept = { untouched: [1, 2] };
    const value = { a: ref('one'), b: [0, { c: ref('two') }], kept };
    const got = (await resolveRefs(value, (r) => Promise.resolve(encode(`value of ${r.name}`)))) as { a: unknown; b: [number, { c: unknown }]; kept: unknown };
    expect(got).toEqual({ a: 'value of one', b: [0, { c: 'value of two' }], kept });
    expect(got.kept).toBe(kept);
    expect(value.a).toEqual(ref('one'));
    expect(await resolveRefs(ref('top'), () => Promise.resolve(encode({ x: 1 })))).toEqual({ x: 1 });
  });

  it('refuses a Triad value this version does not know, however deep', async () => {
    await expect(resolveRefs({ deep: [[{ $triad: 'future', v: 9 }]] }, () => Promise.resolve(encode(1)))).rejects.toThrow(/unknown Triad value "future"/);
  });
});

describe('offloadEncoded', () => {
  it('is the encoding of what offloadValue answers: the value when inline, the reference above the limit, nothing for undefined', async () => {
    const upload = (b: Uint8Array): Promise<ObjectRef> => Promise.resolve(objectRef('triad_2_ns_alice', 'out', b.length, SHA));
    for (const value of [{ small: 1, n: 2 ** 40 }, { big: 'x'.repeat(5_000) }, [1, 'two', { three: 3 }]]) {
      const bytes = await offloadEncoded(value, 'output', 1_024, upload);
      expect(Buffer.from(bytes ?? []).equals(Buffer.from(encode(await offloadValue(value, 'output', 1_024, upload))))).toBe(true);
    }
    expect(unpackTrusted((await offloadEncoded({ big: 'x'.repeat(5_000) }, 'output', 1_024, upload)) ?? encode(null))).toMatchObject({ $triad: 'object', name: 'out' });
    expect(await offloadEncoded(undefined, 'output', 1_024, upload)).toBeUndefined();
    await expect(offloadEncoded({ a: { $triad: 'object' } }, 'output', 1_024, upload)).rejects.toThrow(/\$triad/);
  });
});
