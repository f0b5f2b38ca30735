// The Lua fragments of decision 0019 (§2.5) on a real redis-server: _msgpack.lua's path locator finds
// exactly the bytes msgpackr writes for the value at a path (scalars equal, array lengths exact with nil
// tails, int64, bin apart from str), skips without recursion up to the codec's 128 levels, and refuses
// bytes cut short; _when.lua evaluates a compiled condition over the stored bytes exactly as the
// TypeScript reference evaluate() does, reason text included. Property tests with a FIXED seed (printed
// in the test names), so `npm test` is deterministic; FC_SEED / FC_RUNS explore further.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { compilePredicate, evaluate, resolve, type Reference } from '@triad/core';
import { PredicateSchema, encode, unpackTrusted, type Predicate } from '@triad/protocol';
import { inlineIncludes } from '../src/scripts.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-msgpack-when-test');

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name}=${raw} is not an integer; unset it or give a whole number`);
  return n;
}
const SEED = intFromEnv('FC_SEED', 190019);
const RUNS = intFromEnv('FC_RUNS', 400);

/**
 * The fragments, and a few lines that call them: `locate <bytes> <segments JSON>` answers
 * { 'found', start (0-based), end (exclusive), kind, scalar } | { 'absent' } | { 'error', reason };
 * `when <condition JSON> <has input 1|0> <input> [<step> <output>]…` answers { 'true' | 'false', reason }
 * | { 'error', reason }. Numbers come back as %.17g text (Redis would truncate a Lua number to an integer).
 */
const LUA = inlineIncludes(`--@include _msgpack
--@include _when
if ARGV[1] == 'locate' then
  local bytes = ARGV[2]
  local pos, stop = mp_locate(bytes, 1, cjson.decode(ARGV[3]))
  if pos == nil then return { 'error', stop } end
  if pos == false then return { 'absent' } end
  local kind, v = mp_scalar(bytes, pos)
  local shown = ''
  if kind == 'int' or kind == 'float' then shown = string.format('%.17g', v)
  elseif kind == 'bool' then shown = tostring(v)
  elseif kind == 'str' or kind == 'bin' then shown = v
  elseif kind ~= 'nil' then shown = tostring(v) end
  local count = ''
  if kind == 'array' then
    local n, first = mp_array(bytes, pos)
    count = n .. ':' .. (first - 1)
  end
  return { 'found', pos - 1, stop - 1, kind, shown, count }
end
if ARGV[1] == 'when' then
  local input = nil
  if ARGV[3] == '1' then input = ARGV[4] end
  local outputs = {}
  for i = 5, #ARGV, 2 do outputs[ARGV[i]] = ARGV[i + 1] end
  local holds, reason = when_eval(cjson.decode(ARGV[2]), input, function(step) return outputs[step] end)
  if holds == nil then return { 'error', reason } end
  return { holds and 'true' or 'false', reason or '' }
end
return redis.error_reply('unknown mode ' .. tostring(ARGV[1]))
`);

/** ioredis has evalBuffer at runtime but not in its type declarations (as scripts.ts notes). */
const evalBuffer = (...args: (string | number | Buffer)[]): Promise<unknown> => (r() as unknown as { evalBuffer(...a: (string | number | Buffer)[]): Promise<unknown> }).evalBuffer(...args);

type Located = { found: false } | { found: true; start: number; end: number; kind: string; scalar: Buffer; count?: { n: number; first: number } } | { error: string };

async function locate(bytes: Uint8Array, segments: readonly string[]): Promise<Located> {
  const reply = (await evalBuffer(LUA, 0, 'locate', Buffer.from(bytes), JSON.stringify(segments))) as (Buffer | number)[];
  const tag = String(reply[0]);
  if (tag === 'error') return { error: String(reply[1]) };
  if (tag === 'absent') return { found: false };
  const count = String(reply[5]);
  const [n, first] = count.split(':').map(Number);
  return {
    found: true,
    start: reply[1] as number,
    end: reply[2] as number,
    kind: String(reply[3]),
    scalar: reply[4] as Buffer,
    ...(count !== '' ? { count: { n: n as number, first: first as number } } : {}),
  };
}

async function when(p: Predicate, input: Uint8Array | undefined, outputs: Record<string, Uint8Array>): Promise<{ holds: boolean; reason?: string } | { error: string }> {
  const args: (string | Buffer)[] = ['when', JSON.stringify(compilePredicate(p)), input ? '1' : '0', input ? Buffer.from(input) : ''];
  for (const [step, bytes] of Object.entries(outputs)) args.push(step, Buffer.from(bytes));
  const reply = (await evalBuffer(LUA, 0, ...args)) as Buffer[];
  const tag = String(reply[0]);
  if (tag === 'error') return { error: String(reply[1]) };
  return tag === 'true' ? { holds: true } : { holds: false, reason: (reply[1] as Buffer).toString('utf8') };
}

/** %.17g text from Lua back to a double (inf and nan spelled the C way). */
function luaNumber(text: string): number {
  if (/^-?nan$/.test(text)) return NaN;
  if (text === 'inf') return Infinity;
  if (text === '-inf') return -Infinity;
  return Number(text);
}

// ---- arbitraries: what the project's codec writes (maps with string keys, arrays, strings, numbers
// including int64 and doubles, booleans, nil, bytes) ----

const KEYS = ['a', 'b', 'amount', 'items', 'country', '0', '1', '2', 'é', '😀'];
/** Characters a reason must escape or cut with care: controls, DEL, quote, backslash, 2-, 3- and 4-byte UTF-8. */
const trickyUnit = fc.constantFrom('\u0000', '\n', '\u001f', '\u007f', '"', '\\', 'a', 'é', '€', '😀');
// Short ones, and long ones that a reason cuts at 60 bytes (often inside a multi-byte character).
const tricky = fc.oneof(fc.string({ unit: trickyUnit, maxLength: 10 }), fc.string({ unit: trickyUnit, minLength: 20, maxLength: 90 }));
const key = fc.oneof(fc.constantFrom(...KEYS), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 })).filter((k) => k !== '__proto__');
const scalar = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, 1, -1, 10, 1000, 0.5, 1.5, 'a', 'b', 'FR', 'US', '', 'é', '1'),
  fc.integer({ min: -(2 ** 31), max: 2 ** 32 - 1 }),
  // Each integer encoding's edges (fixint, int8/16/32, uint8/16/32, int64).
  fc.integer({ min: -200, max: 300 }),
  fc.constantFrom(-32, -33, -128, -129, -32768, -32769, 127, 128, 255, 256, 65535, 65536, -(2 ** 31), -(2 ** 31) - 1, 2 ** 31 - 1, 2 ** 32 - 1, 2 ** 32),
  fc.maxSafeInteger(),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
  fc.double(),
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.string({ maxLength: 300 }),
  tricky,
  fc.uint8Array({ maxLength: 300 }),
);
const { value } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', maxDepth: 5 }, scalar, tie('array'), tie('map')),
  array: fc.array(tie('value'), { maxLength: 6 }),
  map: fc.dictionary(key, tie('value'), { maxKeys: 6, noNullPrototype: true }),
}));

/** Every path into a value (up to 8 segments, at most 200 of them), the empty path included. */
function pathsOf(v: unknown): string[][] {
  const out: string[][] = [];
  const stack: [unknown, string[]][] = [[v, []]];
  for (let next = stack.pop(); next !== undefined && out.length < 200; next = stack.pop()) {
    const [x, path] = next;
    out.push(path);
    if (path.length >= 8) continue;
    if (Array.isArray(x)) x.forEach((c, i) => stack.push([c, [...path, String(i)]]));
    else if (x !== null && typeof x === 'object' && !(x instanceof Uint8Array)) for (const [k, c] of Object.entries(x)) stack.push([c, [...path, k]]);
  }
  return out;
}

const segment = fc.oneof(fc.constantFrom(...KEYS, '3', '5', '007', '99999999999999999999'), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 4 }));
const valueAndPath = value.chain((v) => {
  const paths = pathsOf(v);
  return fc.tuple(
    fc.constant(v),
    fc.oneof(
      fc.constantFrom(...paths),
      fc.array(segment, { maxLength: 4 }),
      fc.tuple(fc.constantFrom(...paths), segment).map(([p, s]) => [...p, s]),
    ),
  );
});

const input: Reference = { step: '', path: [] };

describe('_msgpack.lua: the path locator', () => {
  it(`finds exactly the bytes msgpackr writes for the value at a path; scalars and array lengths equal (seed ${SEED}, ${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(valueAndPath, async ([v, path]) => {
        const bytes = encode(v);
        const got = await locate(bytes, path);
        const expected = resolve({ ...input, path }, v, {});
        if ('error' in got) throw new Error(`the locator refused valid msgpack: ${got.error}`);
        expect(got.found).toBe(expected.present);
        if (!got.found || !expected.present) return;
        // The slice is the value's own encoding, byte for byte.
        expect(Buffer.from(bytes.subarray(got.start, got.end)).equals(Buffer.from(encode(expected.value)))).toBe(true);
        // Its scalar, read by Lua, is what msgpackr decodes.
        const decoded = resolve({ ...input, path }, unpackTrusted(bytes), {});
        expect(decoded.present).toBe(true);
        const d = decoded.present ? decoded.value : undefined;
        if (d === null) expect(got.kind).toBe('nil');
        else if (typeof d === 'boolean') expect([got.kind, got.scalar.toString()]).toEqual(['bool', String(d)]);
        else if (typeof d === 'number') {
          expect(['int', 'float']).toContain(got.kind);
          expect(Object.is(luaNumber(got.scalar.toString()), d) || (Number.isNaN(d) && Number.isNaN(luaNumber(got.scalar.toString())))).toBe(true);
        } else if (typeof d === 'string') {
          expect(got.kind).toBe('str');
          expect(got.scalar.equals(Buffer.from(d, 'utf8'))).toBe(true);
        } else if (d instanceof Uint8Array) {
          expect(got.kind).toBe('bin');
          expect(got.scalar.equals(Buffer.from(d))).toBe(true);
        } else if (Array.isArray(d)) {
          expect(got.kind).toBe('array');
          expect(Number(got.scalar.toString())).toBe(d.length);
          expect(got.count?.n).toBe(d.length);
        } else {
          expect(got.kind).toBe('map');
          expect(Number(got.scalar.toString())).toBe(Object.keys(d as object).length);
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it(`refuses bytes cut short, or answers as for the whole bytes when the value lies before the cut (seed ${SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(valueAndPath, fc.nat(), async ([v, path], at) => {
        const bytes = encode(v);
        const cut = bytes.subarray(0, at % bytes.length);
        const whole = await locate(bytes, path);
        const part = await locate(cut, path);
        if (path.length === 0) expect(part).toHaveProperty('error');
        if ('error' in part) {
          expect(part.error).toMatch(/the bytes end (inside|before) a value/);
          return;
        }
        expect(part).toEqual(whole);
        if (part.found) expect(part.end).toBeLessThanOrEqual(cut.length);
      }),
      { seed: SEED, numRuns: Math.ceil(RUNS / 2) },
    );
  });

  it('keeps an array length with nil tails, int64 and uint64, bin apart from str', async () => {
    const doc = { tail: [1, null, null], big: 2n ** 62n + 1n, huge: 2n ** 64n - 1n, neg: -(2n ** 63n), bin: new Uint8Array([1, 2, 3]), str: 'abc' };
    const bytes = encode(doc);
    const tail = await locate(bytes, ['tail']);
    expect(tail).toMatchObject({ found: true, kind: 'array', count: { n: 3 } });
    expect(await locate(bytes, ['tail', '2'])).toMatchObject({ found: true, kind: 'nil' });
    expect(await locate(bytes, ['tail', '3'])).toEqual({ found: false });
    for (const [k, n] of [['big', 2 ** 62 + 1], ['huge', 2 ** 64 - 1], ['neg', -(2 ** 63)]] as const) {
      const got = await locate(bytes, [k]);
      expect(got).toMatchObject({ found: true, kind: 'int' });
      if ('scalar' in got) expect(luaNumber(got.scalar.toString())).toBe(n);
    }
    expect(await locate(bytes, ['bin'])).toMatchObject({ found: true, kind: 'bin', scalar: Buffer.from([1, 2, 3]) });
    expect(await locate(bytes, ['str'])).toMatchObject({ found: true, kind: 'str', scalar: Buffer.from('abc') });
    // A path that goes on into a scalar, or into bytes, leads nowhere.
    expect(await locate(bytes, ['str', '0'])).toEqual({ found: false });
    expect(await locate(bytes, ['bin', '0'])).toEqual({ found: false });
  });

  it('reads every scalar encoding, including those msgpackr does not write (float32, str8 for a short string, bin32)', async () => {
    const cases: [number[], string, string][] = [
      [[0x05], 'int', '5'],
      [[0xff], 'int', '-1'],
      [[0xe0], 'int', '-32'],
      [[0xcc, 0xff], 'int', '255'],
      [[0xcd, 0xff, 0xff], 'int', '65535'],
      [[0xce, 0xff, 0xff, 0xff, 0xff], 'int', '4294967295'],
      [[0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00], 'int', '4294967296'],
      [[0xd0, 0x9c], 'int', '-100'],
      [[0xd1, 0x80, 0x00], 'int', '-32768'],
      [[0xd2, 0x80, 0x00, 0x00, 0x00], 'int', '-2147483648'],
      [[0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe], 'int', '-2'],
      [[0xca, 0x3f, 0xc0, 0x00, 0x00], 'float', '1.5'],
      [[0xcb, 0x3f, 0xb9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a], 'float', '0.10000000000000001'],
      [[0xc0], 'nil', ''],
      [[0xc2], 'bool', 'false'],
      [[0xc3], 'bool', 'true'],
      [[0xa2, 0x68, 0x69], 'str', 'hi'],
      [[0xd9, 0x02, 0x68, 0x69], 'str', 'hi'],
      [[0xda, 0x00, 0x02, 0x68, 0x69], 'str', 'hi'],
      [[0xdb, 0x00, 0x00, 0x00, 0x02, 0x68, 0x69], 'str', 'hi'],
      [[0xc4, 0x02, 0x68, 0x69], 'bin', 'hi'],
      [[0xc5, 0x00, 0x02, 0x68, 0x69], 'bin', 'hi'],
      [[0xc6, 0x00, 0x00, 0x00, 0x02, 0x68, 0x69], 'bin', 'hi'],
      [[0x92, 0x01, 0x02], 'array', '2'],
      [[0xdc, 0x00, 0x02, 0x01, 0x02], 'array', '2'],
      [[0xdd, 0x00, 0x00, 0x00, 0x02, 0x01, 0x02], 'array', '2'],
      [[0x81, 0xa1, 0x61, 0x01], 'map', '1'],
      [[0xde, 0x00, 0x01, 0xa1, 0x61, 0x01], 'map', '1'],
      [[0xdf, 0x00, 0x00, 0x00, 0x01, 0xa1, 0x61, 0x01], 'map', '1'],
    ];
    for (const [bytes, kind, scalar] of cases) {
      const got = await locate(Buffer.from(bytes), []);
      expect(got, `0x${bytes[0]?.toString(16)}`).toEqual({ found: true, start: 0, end: bytes.length, kind, scalar: Buffer.from(scalar), ...(kind === 'array' ? { count: { n: 2, first: bytes.length - 2 } } : {}) });
      // Followed by another value in an array, it is skipped by its exact size.
      const after = await locate(Buffer.concat([Buffer.from([0x92]), Buffer.from(bytes), Buffer.from([0x2a])]), ['1']);
      expect(after, `0x${bytes[0]?.toString(16)} skipped`).toMatchObject({ found: true, kind: 'int', scalar: Buffer.from('42') });
    }
  });

  it('skips ext values (fixext and ext8/16/32) to reach what follows them', async () => {
    const ext = [
      Buffer.from([0xd4, 0x01, 0xaa]),
      Buffer.from([0xd8, 0x02, ...new Array(16).fill(7)]),
      Buffer.from([0xc7, 0x03, 0x05, 1, 2, 3]),
      Buffer.from([0xc8, 0x00, 0x02, 0x05, 1, 2]),
      Buffer.from([0xc9, 0x00, 0x00, 0x00, 0x01, 0x05, 9]),
    ];
    for (const e of ext) {
      // [ext, 42]
      const bytes = Buffer.concat([Buffer.from([0x92]), e, Buffer.from([0x2a])]);
      expect(await locate(bytes, ['1'])).toMatchObject({ found: true, kind: 'int', scalar: Buffer.from('42') });
      expect(await locate(bytes, ['0'])).toMatchObject({ found: true, kind: 'ext', start: 1, end: 1 + e.length });
    }
  });

  it('skips up to 128 levels of nesting and refuses 129, counting the levels above the value too', async () => {
    const nested = (levels: number): Buffer => Buffer.concat([Buffer.alloc(levels, 0x91), Buffer.from([0xc0])]);
    expect(await locate(nested(128), [])).toMatchObject({ found: true, start: 0, end: 129 });
    expect(await locate(nested(129), [])).toEqual({ error: 'it nests more than 128 levels deep' });
    // Inside a map: the map is the first level.
    const inMap = (levels: number): Buffer => Buffer.concat([Buffer.from([0x81, 0xa1, 0x61]), nested(levels)]);
    expect(await locate(inMap(127), ['a'])).toMatchObject({ found: true });
    expect(await locate(inMap(128), ['a'])).toEqual({ error: 'it nests more than 128 levels deep' });
    // A sibling skipped on the way is held to the same limit.
    const sibling = Buffer.concat([Buffer.from([0x92]), nested(128), Buffer.from([0x01])]);
    expect(await locate(sibling, ['1'])).toEqual({ error: 'it nests more than 128 levels deep' });
  });

  it('refuses bytes that are not msgpack, and container counts larger than the bytes, without looping over them', async () => {
    expect(await locate(Buffer.from([0xc1]), [])).toEqual({ error: 'byte 0xc1 starts no msgpack value' });
    expect(await locate(Buffer.from([0x92, 0x01, 0xc1]), ['1'])).toEqual({ error: 'byte 0xc1 starts no msgpack value' });
    expect(await locate(Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff]), [])).toEqual({ error: 'the bytes end inside a value' });
    expect(await locate(Buffer.from([0xdf, 0xff, 0xff, 0xff, 0xff]), ['x'])).toEqual({ error: 'the bytes end before a value' });
    expect(await locate(Buffer.from([0xdb, 0xff, 0xff, 0xff, 0xff, 0x61]), [])).toEqual({ error: 'the bytes end inside a value' });
    expect(await locate(Buffer.alloc(0), [])).toEqual({ error: 'the bytes end before a value' });
  });
});

// ---- conditions: random predicates over random inputs and outputs ----

const OPERANDS = [null, true, false, 0, 1, -1, 10, 1000, 0.5, 1.5, 'a', 'b', 'FR', 'US', '', 'é', '1', '😀'];
const operandScalar = fc.oneof(
  fc.constantFrom<unknown>(...OPERANDS),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.string({ unit: 'grapheme', maxLength: 70 }),
  tricky,
);
const orderedOperand = fc.oneof(fc.constantFrom<unknown>(0, 1, 10, 1000, 0.5, 'a', 'b', 'FR', 'é', ''), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string({ unit: 'grapheme', maxLength: 8 }));
const pathSegment = fc.constantFrom('a', 'b', 'amount', 'items', 'country', '0', '1', '2', 'é');
const source = fc.oneof(
  fc.array(pathSegment, { minLength: 1, maxLength: 3 }).map((p) => ({ input: p.join('.') })),
  fc.tuple(fc.constantFrom('s1', 's2', 's3'), fc.array(pathSegment, { maxLength: 2 })).map(([s, p]) => ({ output: [s, ...p].join('.') })),
);
const operator = fc.oneof(
  fc.tuple(fc.constantFrom('eq', 'ne'), operandScalar),
  fc.tuple(fc.constantFrom('gt', 'gte', 'lt', 'lte'), orderedOperand),
  fc.tuple(fc.constant('in'), fc.array(operandScalar, { minLength: 1, maxLength: 5 })),
  fc.tuple(fc.constant('exists'), fc.boolean()),
);
const { predicate } = fc.letrec((tie) => ({
  predicate: fc.oneof({ depthSize: 'small', maxDepth: 4 }, tie('leaf'), tie('all'), tie('any')),
  leaf: fc.tuple(source, operator).map(([s, [op, v]]) => ({ ...s, [op]: v })),
  all: fc.array(tie('predicate'), { minLength: 1, maxLength: 4 }).map((all) => ({ all })),
  any: fc.array(tie('predicate'), { minLength: 1, maxLength: 4 }).map((any) => ({ any })),
}));
const conditionValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', maxDepth: 3 }, scalar, fc.constantFrom<unknown>(...OPERANDS), tie('array'), tie('map')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  map: fc.dictionary(pathSegment, tie('value'), { maxKeys: 5, noNullPrototype: true }),
})).value;
const maybe = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(a, { nil: undefined, freq: 4 });
const inputs = fc.record({ input: maybe(fc.oneof(fc.dictionary(pathSegment, conditionValue, { maxKeys: 6, noNullPrototype: true }), conditionValue)), s1: maybe(conditionValue), s2: maybe(conditionValue) });

describe('_when.lua: conditions over the stored bytes', () => {
  it(`holds exactly when evaluate() says so, with the same reason (seed ${SEED}, ${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(predicate, inputs, async (raw, v) => {
        const p = PredicateSchema.parse(raw);
        const stored = (x: unknown): Uint8Array | undefined => (x === undefined ? undefined : encode(x));
        const outputs: Record<string, Uint8Array> = {};
        const decoded: Record<string, unknown> = {};
        for (const s of ['s1', 's2'] as const) {
          const b = stored(v[s]);
          if (b) {
            outputs[s] = b;
            decoded[s] = unpackTrusted(b);
          }
        }
        const inputBytes = stored(v.input);
        const expected = evaluate(p, inputBytes ? unpackTrusted(inputBytes) : undefined, decoded);
        expect(await when(p, inputBytes, outputs)).toEqual(expected);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("gives the design's reasons", async () => {
    const order = encode({ amount: 10, country: 'US', items: [{ sku: 'a' }, { sku: 'b' }], note: 'x'.repeat(100), ratio: 0.1 + 0.2 });
    const score = encode({ risk: 0.5 });
    const check = async (p: Predicate, holds: boolean, reason?: string): Promise<void> => {
      const got = await when(p, order, { score });
      expect(got).toEqual(holds ? { holds } : { holds, reason });
      expect(got).toEqual(evaluate(p, unpackTrusted(order), { score: unpackTrusted(score) }));
    };
    await check({ input: 'amount', gt: 1000 }, false, 'amount 10 is not > 1000');
    await check({ output: 'score.risk', gte: 0.7 }, false, 'score.risk 0.5 is not >= 0.7');
    await check({ output: 'score.level', gte: 0.7 }, false, 'score.level is absent');
    await check({ input: 'country', in: ['FR', 'DE'] }, false, 'country "US" is not in ["FR","DE"]');
    await check({ any: [{ input: 'country', in: ['FR', 'DE'] }, { output: 'score.risk', gte: 0.7 }] }, false, 'none of: country "US" is not in ["FR","DE"]; score.risk 0.5 is not >= 0.7');
    await check({ all: [{ input: 'amount', lt: 100 }, { input: 'items.1.sku', eq: 'c' }, { input: 'amount', gt: 5 }] }, false, 'items.1.sku "b" is not "c"');
    await check({ input: 'amount', eq: 10 }, true);
    await check({ input: 'amount', eq: '10' }, false, 'amount 10 is not "10"');
    await check({ input: 'amount', ne: 10 }, false, 'amount is 10');
    await check({ input: 'missing', ne: 10 }, true);
    await check({ input: 'items', exists: true }, true);
    await check({ input: 'items', eq: 2 }, false, 'items [2 items] is not 2');
    await check({ input: 'items', exists: false }, false, 'items [2 items] exists');
    await check({ output: 'score', exists: false }, false, 'score {1 key} exists');
    await check({ input: 'note', eq: 'y' }, false, `note "${'x'.repeat(60)}…" is not "y"`);
    await check({ input: 'ratio', lt: 0.3 }, false, 'ratio 0.30000000000000004 is not < 0.3');
  });

  it('tells bytes that are not msgpack from an absent value', async () => {
    const cut = encode({ items: [1, 2, 3] }).subarray(0, 4);
    expect(await when({ input: 'items', exists: true }, cut, {})).toEqual({ error: 'the task input is not valid msgpack at items (the bytes end inside a value)' });
    expect(await when({ output: 'quote.total', gt: 1 }, encode({}), { quote: Buffer.from([0x81, 0xc1]) })).toEqual({ error: 'the output of quote is not valid msgpack at quote.total (byte 0xc1 starts no msgpack value)' });
  });
});
