/**
 * The messages the fuzzer sends: for each target, seeded fast-check arbitraries of drafts (valid
 * samples, near-misses, random and corrupted bytes, msgpack of the wrong type, deep nesting, unknown
 * extension types, mixed result batches, huge payloads), and `materialize`, which turns a draft into bytes.
 */
import fc from 'fast-check';
import { encode } from '@triad/protocol';
import { extraKey, isPlainObject, nearMiss, sitesOf, updateAt, type Mutation, type Path } from './mutations.js';
import { REPLY, stepRequest, stepResult, type Target } from './targets.js';

export const CATEGORIES = ['valid', 'near-miss', 'random-bytes', 'corrupted', 'wrong-type', 'deep', 'unknown-ext', 'batch', 'huge'] as const;
export type Category = (typeof CATEGORIES)[number];

/** Where a deep value, an extension value or a huge padding was put (a path like a mutation's). */
export interface Placement {
  kind: 'deep' | 'unknown-ext' | 'huge';
  path: Path;
  /** The field did not exist before: it was added. */
  added: boolean;
}

export interface Draft {
  category: Category;
  /** What a near-miss changed, or where a deep, extension or huge value was put. */
  change?: Mutation | Placement;
  /** Encoded with the protocol's encoder (after REPLY is replaced by the case's reply subject). */
  value?: unknown;
  /** Sent as they are. */
  raw?: Uint8Array;
  /** Raw msgpack put where `value` holds the SPLICE marker (values msgpackr would not write itself). */
  splice?: Uint8Array;
  /** Padded (at the PAD marker) to exactly this many bytes. */
  size?: number;
  /** Applied to the encoded bytes: cut at a fraction of the length, and bytes flipped. */
  corrupt?: { truncateAt?: number; flips: { at: number; xor: number }[] };
  /** Unknown fields `fzK0`, `fzK1`, … (nil) added to the message, this many. */
  extraFields?: number;
  /** A batch of results (or step requests): each item encoded on its own, in `results` (`requests`). */
  items?: Draft[];
  /** A human hint (e.g. "just under the stream's max_msg_size"). */
  note?: string;
}

const SPLICE = '@@splice@@';
const PAD = '@@pad@@';

/** The byte limits huge drafts are placed around. */
export interface SizeLimits {
  /** Triad's own limit (DEFAULT_MAX_MESSAGE_BYTES). */
  protocol: number;
  /** What NATS accepts on this subject: the stream's max_msg_size, or the server's max_payload. */
  transport: number;
}

// ---- raw msgpack pieces ----

/** `depth` nested one-element arrays (or one-key maps) around nil: msgpackr's decoder recurses once per level. */
export function nested(depth: number, container: 'array' | 'map'): Uint8Array {
  const level = container === 'array' ? [0x91] : [0x81, 0xa1, 0x61];
  const out = new Uint8Array(depth * level.length + 1);
  for (let i = 0; i < depth; i++) out.set(level, i * level.length);
  out[out.length - 1] = 0xc0;
  return out;
}

/** An extension value of any type code (msgpackr knows a few; the rest are unknown to it). */
export function extension(type: number, data: Uint8Array): Uint8Array {
  const fixed: Record<number, number> = { 1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8 };
  const head = fixed[data.length] !== undefined ? [fixed[data.length]!, type & 0xff] : [0xc7, data.length, type & 0xff];
  const out = new Uint8Array(head.length + data.length);
  out.set(head);
  out.set(data, head.length);
  return out;
}

// ---- turning drafts into bytes ----

function withReply(v: unknown, reply: string): unknown {
  if (typeof v === 'string') return v.includes(REPLY) ? v.split(REPLY).join(reply) : v;
  if (Array.isArray(v)) return v.map((x) => withReply(x, reply));
  if (isPlainObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withReply(x, reply)]));
  return v;
}

function replaceMarker(bytes: Uint8Array, marker: string, by: Uint8Array): Uint8Array {
  const m = encode(marker);
  const at = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).indexOf(Buffer.from(m.buffer, m.byteOffset, m.length));
  if (at < 0) throw new Error(`materialize: marker ${marker} not found in the encoded draft`);
  const out = new Uint8Array(bytes.length - m.length + by.length);
  out.set(bytes.subarray(0, at));
  out.set(by, at);
  out.set(bytes.subarray(at + m.length), at + by.length);
  return out;
}

/** A str32 of the length that makes the whole message exactly `size` bytes. */
function padding(bytes: Uint8Array, size: number): Uint8Array {
  const rest = bytes.length - encode(PAD).length;
  const len = size - rest - 5;
  if (len < 0) throw new Error(`materialize: cannot pad a ${bytes.length}-byte draft to ${size} bytes`);
  const out = new Uint8Array(5 + len).fill(0x78); // 'x'
  out[0] = 0xdb;
  new DataView(out.buffer).setUint32(1, len);
  return out;
}

/** The bytes of a draft; `reply` is the case's own reply subject (replacing REPLY). */
export function materialize(d: Draft, reply: string): Uint8Array {
  if (d.raw) return d.raw;
  let value = withReply(d.value, reply);
  // A batch's items go in its own key: `requests` for step request batches, else `results`.
  if (d.items) value = { ...(value as object), [isPlainObject(value) && 'requests' in value ? 'requests' : 'results']: d.items.map((i) => materialize(i, reply)) };
  if (d.extraFields !== undefined) {
    const extra: Record<string, null> = {};
    for (let i = 0; i < d.extraFields; i++) extra[`fzK${i}`] = null;
    value = isPlainObject(value) ? { ...value, ...extra } : extra;
  }
  let bytes = encode(value, Number.MAX_SAFE_INTEGER);
  if (d.splice) bytes = replaceMarker(bytes, SPLICE, d.splice);
  if (d.size !== undefined) bytes = replaceMarker(bytes, PAD, padding(bytes, d.size));
  if (d.corrupt) {
    const c = d.corrupt;
    bytes = c.truncateAt === undefined ? new Uint8Array(bytes) : bytes.slice(0, Math.floor(bytes.length * c.truncateAt));
    for (const f of c.flips) if (bytes.length > 0) bytes[Math.floor(f.at * bytes.length) % bytes.length]! ^= f.xor;
  }
  return bytes;
}

// ---- arbitraries ----

/** Puts `marker` at a random field of the sample, or in a new field, and says where. */
function placed(sample: fc.Arbitrary<unknown>, marker: string, kind: Placement['kind']): fc.Arbitrary<{ value: unknown; change: Placement }> {
  return sample.chain((s) => {
    const sites = sitesOf(s).filter((x) => x.path.length > 0);
    const asNew = extraKey.map((k) => ({ value: isPlainObject(s) ? { ...s, [k]: marker } : marker, change: { kind, path: isPlainObject(s) ? [k] : [], added: true } }));
    if (sites.length === 0) return asNew;
    const atSite = fc.constantFrom(...sites).map((site) => ({ value: updateAt(s, site.path, (p, k) => void ((p as Record<string | number, unknown>)[k] = marker)), change: { kind, path: site.path, added: false } }));
    return fc.oneof(atSite, asNew);
  });
}

const wrongType: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 40 }),
  fc.boolean(),
  fc.constant(null),
  fc.date({ noInvalidDate: true }),
  fc.uint8Array({ maxLength: 40 }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 8 }),
  fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 8 }),
);

const corruption = fc.record({
  truncateAt: fc.option(fc.double({ min: 0, max: 0.999, noNaN: true }), { nil: undefined }),
  flips: fc.array(fc.record({ at: fc.double({ min: 0, max: 0.999, noNaN: true }), xor: fc.integer({ min: 1, max: 255 }) }), { maxLength: 3 }),
});

/** Depths on both sides of MAX_NESTING_DEPTH, and of what a decoder's stack holds (a few thousand levels). */
const depth = fc.oneof(fc.integer({ min: 2, max: 300 }), fc.integer({ min: 300, max: 4_000 }), fc.integer({ min: 4_000, max: 30_000 }));

/** Every category but huge and batch; `placements` adds deep values and extension values. */
function smallDrafts(sample: fc.Arbitrary<unknown>, placements = true): { weight: number; arbitrary: fc.Arbitrary<Draft> }[] {
  const parts: { weight: number; arbitrary: fc.Arbitrary<Draft> }[] = [
    { weight: 8, arbitrary: sample.map((value): Draft => ({ category: 'valid', value })) },
    { weight: 45, arbitrary: nearMiss(sample).map(({ value, mutation }): Draft => ({ category: 'near-miss', value, change: mutation })) },
    { weight: 7, arbitrary: fc.uint8Array({ maxLength: 300 }).map((raw): Draft => ({ category: 'random-bytes', raw })) },
    { weight: 8, arbitrary: fc.tuple(sample, corruption).map(([value, c]): Draft => ({ category: 'corrupted', value, corrupt: c.truncateAt === undefined ? { flips: c.flips } : { truncateAt: c.truncateAt, flips: c.flips } })) },
    { weight: 9, arbitrary: wrongType.map((value): Draft => ({ category: 'wrong-type', value })) },
  ];
  if (!placements) return parts;
  parts.push(
    {
      weight: 6,
      arbitrary: fc
        .tuple(placed(sample, SPLICE, 'deep'), depth, fc.constantFrom('array' as const, 'map' as const))
        .map(([p, d, c]): Draft => ({ category: 'deep', value: p.value, change: p.change, splice: nested(d, c), note: `${d} levels of ${c}s` })),
    },
    {
      weight: 6,
      arbitrary: fc
        .tuple(placed(sample, SPLICE, 'unknown-ext'), fc.integer({ min: -128, max: 127 }), fc.uint8Array({ maxLength: 24 }))
        .map(([p, type, data]): Draft => ({ category: 'unknown-ext', value: p.value, change: p.change, splice: extension(type, data), note: `extension type ${type}` })),
    },
  );
  return parts;
}

/** The drafts of one target, excluding huge ones. */
export function draftArbitrary(target: Target, now: number): fc.Arbitrary<Draft> {
  const parts = smallDrafts(target.sample);
  if (target.kind === 'result') {
    // A batch of results each valid or not on its own (the scheduler judges, applies and dead-letters each).
    const item = fc.oneof(...smallDrafts(stepResult(now), false));
    parts.push({ weight: 12, arbitrary: fc.array(item, { minLength: 1, maxLength: 8 }).map((items): Draft => ({ category: 'batch', value: { results: [] }, items })) });
  }
  if (target.kind === 'step-batch') {
    // A batch of step requests each valid or not on its own (the agent judges, runs and dead-letters each).
    const item = fc.oneof(...smallDrafts(stepRequest(target.agent, now), false));
    parts.push({ weight: 12, arbitrary: fc.array(item, { minLength: 1, maxLength: 8 }).map((items): Draft => ({ category: 'batch', value: { requests: [] }, items })) });
  }
  return fc.oneof(...parts);
}

/**
 * Huge drafts of one target, in the order they are taken when fewer are asked for: just under what NATS
 * accepts on the subject, over Triad's limit, tens of thousands of unknown fields (a schema's verdict
 * lists every one), at most Triad's limit, and over what NATS accepts (NATS refuses it: the publisher,
 * not Triad, gets the error).
 */
export function hugeArbitrary(target: Target, limits: SizeLimits, count: number): fc.Arbitrary<Draft[]> {
  const { protocol, transport } = limits;
  const padded = (size: fc.Arbitrary<number>, note: string): fc.Arbitrary<Draft> =>
    fc.tuple(placed(target.sample, PAD, 'huge'), size).map(([p, s]): Draft => ({ category: 'huge', value: p.value, change: p.change, size: s, note }));
  const manyFields = fc
    .tuple(target.sample, fc.integer({ min: 10_000, max: 40_000 }))
    .map(([value, count]): Draft => ({ category: 'huge', value, extraFields: count, change: { kind: 'huge', path: ['fzK0'], added: true }, note: `${count} unknown fields` }));
  const all = [
    padded(fc.integer({ min: transport - 64, max: transport }), 'just under what NATS accepts'),
    padded(fc.integer({ min: protocol + 1, max: Math.max(protocol + 1, transport - 65) }), "over Triad's limit"),
    manyFields,
    padded(fc.integer({ min: protocol - 20_000, max: protocol }), "at most Triad's limit"),
    padded(fc.integer({ min: transport + 1, max: transport + 4_096 }), 'over what NATS accepts'),
  ];
  return fc.tuple(...all.slice(0, count));
}

/** How many kinds of huge draft hugeArbitrary makes. */
export const HUGE_KINDS = 5;

/** Seeded and reproducible: `count` drafts for a target (with `huge` of them huge). */
export function draftsFor(target: Target, o: { seed: number; count: number; huge: number; now: number; limits: SizeLimits }): Draft[] {
  const small = o.count - o.huge;
  const drafts = small > 0 ? fc.sample(draftArbitrary(target, o.now), { seed: o.seed, numRuns: small }) : [];
  if (o.huge > 0) {
    const [huge] = fc.sample(hugeArbitrary(target, o.limits, o.huge), { seed: o.seed + 1, numRuns: 1 });
    drafts.push(...(huge ?? []));
  }
  return drafts;
}
