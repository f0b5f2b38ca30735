/**
 * Near-misses: a valid message with one thing changed (a field dropped, retyped, out of range, too long,
 * a bad enum value, a wildcard in a subject, an unknown field, nil), recording the field path touched.
 * Whether the result is still valid is not decided here: the oracle asks the schema.
 */
import fc from 'fast-check';

export type Path = readonly (string | number)[];

export const MUTATION_KINDS = ['drop', 'retype', 'out-of-range', 'over-long', 'bad-enum', 'wildcard', 'extra-field', 'nil', 'empty'] as const;
export type MutationKind = (typeof MUTATION_KINDS)[number];

export interface Mutation {
  kind: MutationKind;
  /** The field the mutation touched; for `extra-field`, the added field. */
  path: Path;
}

/** A place in a message: the value at a path. */
export interface Site {
  path: Path;
  value: unknown;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);
}

/** Every path in a value (objects and arrays are walked; binary, dates and scalars are leaves). */
export function sitesOf(value: unknown, path: Path = []): Site[] {
  const here: Site = { path, value };
  if (Array.isArray(value)) return [here, ...value.flatMap((v, i) => sitesOf(v, [...path, i]))];
  if (isPlainObject(value)) return [here, ...Object.entries(value).flatMap(([k, v]) => sitesOf(v, [...path, k]))];
  return [here];
}

/** A path as the schemas print it in their issues: `error.retryable`, `(root)` for the message. */
export function pathText(path: Path): string {
  return path.length === 0 ? '(root)' : path.join('.');
}

function kindsFor(site: Site): MutationKind[] {
  const v = site.value;
  const kinds: MutationKind[] = site.path.length === 0 ? [] : ['drop', 'retype', 'nil'];
  if (typeof v === 'number') kinds.push('out-of-range');
  if (typeof v === 'string') kinds.push('over-long', 'bad-enum', 'wildcard', 'empty');
  if (Array.isArray(v)) kinds.push('over-long', 'empty');
  if (isPlainObject(v)) kinds.push('extra-field', 'empty');
  return kinds;
}

/** Names no message field has: an added field never collides with a real one. */
export const extraKey = fc.stringMatching(/^fz[A-Z][A-Za-z0-9_]{0,10}$/);

const smallValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 20 }),
  fc.boolean(),
  fc.constant(null),
  fc.uint8Array({ maxLength: 16 }),
  fc.array(fc.integer(), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.integer(), { maxKeys: 3 }),
);

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Uint8Array) return 'binary';
  return typeof v;
}

const outOfRange = fc.oneof(
  fc.constantFrom(-1, 0, -(2 ** 31), 2 ** 31, 2 ** 53, 2 ** 64, 1.5, -0.5, 1e300, -1e300, Infinity, -Infinity, Number.NaN),
  fc.double(),
  fc.integer({ min: -(2 ** 40), max: -1 }),
);

/** Lengths just past the schemas' usual limits (names 64, task ids 128, agent ids 200, subjects 256, …) and far past. */
const overLength = fc.oneof(fc.constantFrom(65, 129, 201, 257, 513, 1_001, 4_001), fc.integer({ min: 1, max: 60_000 }));

function replacement(kind: MutationKind, site: Site): fc.Arbitrary<unknown> {
  const v = site.value;
  switch (kind) {
    case 'retype':
      return smallValue.filter((r) => typeOf(r) !== typeOf(v));
    case 'out-of-range':
      return outOfRange;
    case 'over-long':
      return Array.isArray(v)
        ? fc.integer({ min: 257, max: 1_100 }).map((n): unknown[] => Array.from({ length: n }, (_, i): unknown => (v as unknown[])[i % Math.max(1, v.length)] ?? 0))
        : fc.tuple(overLength, fc.constantFrom('x', 'é', '0', '-')).map(([n, c]) => `${String(v)}${c.repeat(n)}`);
    case 'bad-enum':
      return fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('RUN', 'Run', 'running', 'compensated', 'true', '0', 'null', '*', '..', 'a.b'));
    case 'wildcard': {
      const s = String(v);
      return fc.constantFrom(`${s}.*`, `${s}.>`, '*', '>', `*.${s}`, `${s} x`, `${s}\t`, `${s}\n`, `${s}..x`);
    }
    case 'extra-field':
      return fc.tuple(extraKey, smallValue);
    case 'nil':
      return fc.constant(null);
    case 'empty':
      return fc.constant(Array.isArray(v) ? [] : isPlainObject(v) ? {} : '');
    case 'drop':
      return fc.constant(undefined);
  }
}

/** The value with `fn` applied at `path` (a copy; the input is left alone). */
export function updateAt(root: unknown, path: Path, fn: (parent: Record<string | number, unknown> | unknown[], key: string | number) => void): unknown {
  const copy = structuredClone(root);
  if (path.length === 0) throw new Error('updateAt: the root has no parent');
  let parent = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  fn(parent, path[path.length - 1]!);
  return copy;
}

function apply(root: unknown, site: Site, kind: MutationKind, r: unknown): { value: unknown; mutation: Mutation } {
  if (kind === 'extra-field') {
    const [key, extra] = r as [string, unknown];
    const path = [...site.path, key];
    const value = site.path.length === 0 ? { ...(root as object), [key]: extra } : updateAt(root, path, (p, k) => void ((p as Record<string, unknown>)[k] = extra));
    return { value, mutation: { kind, path } };
  }
  if (site.path.length === 0) return { value: r, mutation: { kind, path: site.path } };
  const value = updateAt(root, site.path, (p, k) => {
    if (kind !== 'drop') (p as Record<string | number, unknown>)[k] = r;
    else if (Array.isArray(p)) p.splice(Number(k), 1);
    else delete p[k];
  });
  return { value, mutation: { kind, path: site.path } };
}

/** One near-miss of a sample: a site, a mutation that applies to it, and the mutated value. */
export function nearMiss(sample: fc.Arbitrary<unknown>): fc.Arbitrary<{ value: unknown; mutation: Mutation }> {
  return sample.chain((s) => {
    const sites = sitesOf(s).filter((site) => kindsFor(site).length > 0);
    return fc
      .constantFrom(...sites)
      .chain((site) => fc.constantFrom(...kindsFor(site)).chain((kind) => replacement(kind, site).map((r) => apply(s, site, kind, r))));
  });
}
