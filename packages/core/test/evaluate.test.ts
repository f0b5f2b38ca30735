// The reference evaluator of `when` conditions (decision 0019 §1.3–1.4): paths, absent values, the
// comparison rules (same-kind scalars, numbers as doubles, strings as UTF-8 bytes), short-circuiting
// all/any, and the reason texts a skipped step shows — exact, since the Lua evaluator must print the
// same (packages/store/test/msgpack-when.test.ts compares them).
import { describe, expect, it } from 'vitest';
import type { Predicate } from '@triad/protocol';
import { cutUtf8, describePredicate, evaluate, formatNumber, render } from '../src/index.js';

const order = { amount: 10, country: 'US', items: [{ sku: 'a' }, { sku: 'b', qty: null }], coupon: null, flags: { vip: true } };
const outputs = { score: { risk: 0.5 }, empty: null };
const run = (p: Predicate) => evaluate(p, order, outputs);

describe('evaluate', () => {
  it("gives the design's reasons", () => {
    expect(run({ input: 'amount', gt: 1000 })).toEqual({ holds: false, reason: 'amount 10 is not > 1000' });
    expect(run({ output: 'score.level', gte: 0.7 })).toEqual({ holds: false, reason: 'score.level is absent' });
    expect(run({ input: 'country', in: ['FR', 'DE'] })).toEqual({ holds: false, reason: 'country "US" is not in ["FR","DE"]' });
    expect(run({ any: [{ input: 'country', in: ['FR', 'DE'] }, { output: 'score.risk', gte: 0.7 }] })).toEqual({
      holds: false,
      reason: 'none of: country "US" is not in ["FR","DE"]; score.risk 0.5 is not >= 0.7',
    });
  });

  it('follows paths through maps and arrays; anything else is absent', () => {
    expect(run({ input: 'items.1.sku', eq: 'b' })).toEqual({ holds: true });
    expect(run({ input: 'items.01.sku', eq: 'b' })).toEqual({ holds: true });
    expect(run({ input: 'items.2.sku', exists: true })).toEqual({ holds: false, reason: 'items.2.sku is absent' });
    expect(run({ input: 'items.x', exists: true })).toEqual({ holds: false, reason: 'items.x is absent' });
    expect(run({ input: 'amount.x', exists: true })).toEqual({ holds: false, reason: 'amount.x is absent' });
    expect(run({ output: 'nobody', exists: true })).toEqual({ holds: false, reason: 'nobody is absent' });
    expect(evaluate({ input: 'amount', exists: false }, undefined, {})).toEqual({ holds: true });
    // A whole output; an output that is nil is present (and null).
    expect(run({ output: 'score', exists: true })).toEqual({ holds: true });
    expect(run({ output: 'empty', exists: true })).toEqual({ holds: false, reason: 'empty is null' });
    expect(run({ output: 'empty', eq: null })).toEqual({ holds: true });
  });

  it('exists, eq/ne of nil and absent', () => {
    expect(run({ input: 'coupon', exists: true })).toEqual({ holds: false, reason: 'coupon is null' });
    expect(run({ input: 'coupon', exists: false })).toEqual({ holds: true });
    expect(run({ input: 'nothing', exists: false })).toEqual({ holds: true });
    expect(run({ input: 'flags', exists: false })).toEqual({ holds: false, reason: 'flags {1 key} exists' });
    expect(run({ input: 'coupon', eq: null })).toEqual({ holds: true });
    expect(run({ input: 'nothing', eq: null })).toEqual({ holds: false, reason: 'nothing is absent' });
    expect(run({ input: 'nothing', ne: 'x' })).toEqual({ holds: true });
    expect(run({ input: 'country', ne: 'US' })).toEqual({ holds: false, reason: 'country is "US"' });
    expect(run({ input: 'items.1.qty', ne: null })).toEqual({ holds: false, reason: 'items.1.qty is null' });
  });

  it('compares scalars of the same kind only; a map or array equals nothing', () => {
    expect(evaluate({ input: 'n', eq: 1 }, { n: 1.0 }, {})).toEqual({ holds: true });
    expect(evaluate({ input: 'n', eq: 1 }, { n: '1' }, {})).toEqual({ holds: false, reason: 'n "1" is not 1' });
    expect(evaluate({ input: 'n', gt: 0 }, { n: '1' }, {})).toEqual({ holds: false, reason: 'n "1" is not > 0' });
    expect(evaluate({ input: 'n', eq: true }, { n: 1 }, {})).toEqual({ holds: false, reason: 'n 1 is not true' });
    expect(run({ input: 'items', eq: 2 })).toEqual({ holds: false, reason: 'items [2 items] is not 2' });
    expect(run({ input: 'flags', in: [null, 'x'] })).toEqual({ holds: false, reason: 'flags {1 key} is not in [null,"x"]' });
    expect(evaluate({ input: 'b', eq: 'abc' }, { b: new Uint8Array([97, 98, 99]) }, {})).toEqual({ holds: false, reason: 'b <3 bytes> is not "abc"' });
    expect(evaluate({ input: 'n', lte: 10 }, { n: 10 }, {})).toEqual({ holds: true });
    expect(evaluate({ input: 'n', lt: 10 }, { n: NaN }, {})).toEqual({ holds: false, reason: 'n NaN is not < 10' });
    expect(evaluate({ input: 'n', gte: 5 }, { n: 2n ** 60n }, {})).toEqual({ holds: true });
  });

  it('orders strings by their UTF-8 bytes, not by UTF-16 code units', () => {
    // U+1F600 is F0 9F 98 80 in UTF-8 (above EF BF BD, U+FFFD) but D83D DE00 in UTF-16 (below FFFD).
    expect(evaluate({ input: 's', gt: '\uFFFD' }, { s: '😀' }, {})).toEqual({ holds: true });
    expect(evaluate({ input: 's', lt: 'b' }, { s: 'abc' }, {})).toEqual({ holds: true });
    expect(evaluate({ input: 's', lt: 'ab' }, { s: 'abc' }, {})).toEqual({ holds: false, reason: 's "abc" is not < "ab"' });
  });

  it('all ends at the first false condition; any says none of them held', () => {
    expect(run({ all: [{ input: 'amount', lt: 100 }, { input: 'country', eq: 'FR' }, { input: 'nope', exists: true }] })).toEqual({
      holds: false,
      reason: 'country "US" is not "FR"',
    });
    expect(run({ all: [{ input: 'amount', lt: 100 }, { any: [{ input: 'x', exists: true }, { input: 'amount', gt: 50 }] }] })).toEqual({
      holds: false,
      reason: 'none of: x is absent; amount 10 is not > 50',
    });
    expect(run({ any: [{ input: 'x', exists: true }, { input: 'amount', lt: 50 }] })).toEqual({ holds: true });
  });

  it('cuts a reason to 500 bytes at a character boundary, and a shown string to 60', () => {
    const long = 'é'.repeat(300);
    const r = evaluate({ input: 's', eq: 'x' }, { s: long }, {});
    expect(r.reason).toBe(`s "${'é'.repeat(30)}…" is not "x"`);
    const many = { any: Array.from({ length: 16 }, (_, i) => ({ input: `k${i}`, eq: '€'.repeat(20) })) };
    const values = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, '€'.repeat(30)]));
    const cut = evaluate(many, values, {}).reason ?? '';
    expect(cut.startsWith(`none of: k0 "${'€'.repeat(20)}…" is not "${'€'.repeat(20)}"; k1 `)).toBe(true);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(500);
    expect(cut.endsWith('…')).toBe(true);
    expect(cutUtf8('aé', 2, false)).toBe('a');
    expect(cutUtf8('abcdef', 5)).toBe('ab…');
    expect(cutUtf8('abc', 5)).toBe('abc');
    expect(render('a"b\\c\n\u007f')).toBe('"a\\"b\\\\c\\u000a\\u007f"');
  });
});

describe('formatNumber (what Lua prints too)', () => {
  it('prints integers in full and anything else as the shortest %g that reads back', () => {
    const cases: [number, string][] = [
      [0, '0'],
      [-0, '0'],
      [1000, '1000'],
      [-42, '-42'],
      [2 ** 53 - 1, '9007199254740991'],
      [2 ** 53, '9007199254740992'],
      [2 ** 60, '1.152921504606847e+18'],
      [0.1, '0.1'],
      [0.1 + 0.2, '0.30000000000000004'],
      [1.5, '1.5'],
      [1e21, '1e+21'],
      [1.5e-7, '1.5e-07'],
      [0.0001, '0.0001'],
      [123456.789, '123456.789'],
      // 2^50 + 0.25: at 17 digits exactly halfway, glibc rounds to even (…624.2), as the exact %g here does.
      [2 ** 50 + 0.25, '1125899906842624.2'],
      [Number.MIN_VALUE, '5e-324'],
      [Number.MAX_VALUE, '1.7976931348623157e+308'],
      [NaN, 'NaN'],
      [Infinity, 'Infinity'],
      [-Infinity, '-Infinity'],
    ];
    for (const [v, s] of cases) expect(formatNumber(v), String(v)).toBe(s);
    for (const [v] of cases) if (Number.isFinite(v)) expect(Number(formatNumber(v))).toBe(v === 0 ? 0 : v);
  });
});

describe('describePredicate', () => {
  it('is one line for workflows show', () => {
    expect(describePredicate({ input: 'amount', gt: 1000 })).toBe('amount > 1000');
    expect(describePredicate({ any: [{ input: 'country', in: ['FR', 'DE'] }, { output: 'score.risk', gte: 0.7 }] })).toBe('any(country in ["FR","DE"], score.risk >= 0.7)');
    expect(describePredicate({ all: [{ input: 'a', exists: false }, { output: 's', ne: null }] })).toBe('all(a is absent or null, s != null)');
  });
});
