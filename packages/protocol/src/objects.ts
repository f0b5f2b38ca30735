/**
 * Large payloads (decision 0021 §4, docs/protocol.md §12): a task input or step output whose msgpack
 * encoding is above the inline threshold travels as an **object reference** — a msgpack map whose first
 * key is `$triad` — to an object in the JetStream object store bucket of the task's client. No I/O here:
 * the reference's schema, its detection from the first bytes, the reserved-key check writers make, the
 * bucket and object names, and the payload broker's API bodies (clients upload and download through the
 * schedulers: a client's NATS account has no JetStream, decision 0022).
 */
import { z } from 'zod';
import { NAME_PATTERN, NAMESPACE_PATTERN, TASK_ID_PATTERN } from './constants.js';

/** Above this many encoded bytes a payload goes to the object store (TRIAD_INLINE_MAX_BYTES; 256 KiB). */
export const DEFAULT_INLINE_MAX_BYTES = 262_144;
/** The smallest threshold allowed. */
export const MIN_INLINE_MAX_BYTES = 1_024;
/** The largest object a writer stores or a reader downloads (TRIAD_MAX_OBJECT_BYTES; 64 MiB). */
export const DEFAULT_MAX_OBJECT_BYTES = 64 * 1024 * 1024;
/** The bytes of one part of a brokered upload or download (the object store's chunk size, 128 KiB). */
export const OBJECT_CHUNK_BYTES = 128 * 1024;
/** The reserved key: a map whose first key it is belongs to Triad; user data may not contain it at any depth. */
export const RESERVED_KEY = '$triad';

export const ObjectRefSchema = z.object({
  $triad: z.literal('object'),
  v: z.literal(1),
  bucket: z.string().regex(/^triad_[0-9]{1,2}_[A-Za-z0-9_-]+$/, 'bucket must be triad_<length of ns>_<ns>_<client>').max(120),
  name: z.string().min(1).max(400),
  /** Bytes of the msgpack value stored in the object. */
  size: z.number().int().nonnegative(),
  /** SHA-256 of those bytes, lower-case hex, computed by the writer. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'sha256 must be 64 lower-case hex digits'),
});
export type ObjectRef = z.output<typeof ObjectRefSchema>;

/** A reference with its keys in the order the protocol writes them (`$triad` first). */
export function objectRef(bucket: string, name: string, size: number, sha256: string): ObjectRef {
  return { $triad: 'object', v: 1, bucket, name, size, sha256 };
}

const RESERVED_KEY_BYTES = [0xa6, ...Buffer.from(RESERVED_KEY, 'utf8')];

/**
 * Whether msgpack bytes are a Triad value (a map whose first key is `$triad`), read from the first bytes
 * only: fixmap or map16/map32 header, then the fixstr `$triad`. The payload is not decoded.
 */
export function isObjectRef(bytes: Uint8Array | undefined): boolean {
  if (!bytes || bytes.length < 8) return false;
  const t = bytes[0] ?? 0;
  const at = t >= 0x81 && t <= 0x8f ? 1 : t === 0xde ? 3 : t === 0xdf ? 5 : -1;
  if (at < 0 || bytes.length < at + RESERVED_KEY_BYTES.length) return false;
  return RESERVED_KEY_BYTES.every((b, i) => bytes[at + i] === b);
}

/** Whether a decoded value is a map whose first key is `$triad` (a Triad value, a reference if valid). */
export function isTriadValue(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || ArrayBuffer.isView(value)) return false;
  for (const k in value) return k === RESERVED_KEY;
  return false;
}

/**
 * Where a user value contains the reserved key `$triad` (`input.items[3]`), or undefined when it does
 * not. Writers refuse such a value: readers must be able to tell a reference from user data.
 */
export function reservedKeyPath(value: unknown, path = 'input'): string | undefined {
  const stack: [unknown, string][] = [[value, path]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [v, p] = next;
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v) || v instanceof Date) continue;
    if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push([x, `${p}[${i}]`]));
      continue;
    }
    if (v instanceof Map) {
      for (const [k, x] of v) {
        if (k === RESERVED_KEY) return p;
        stack.push([x, `${p}.${String(k)}`]);
      }
      continue;
    }
    for (const k of Object.keys(v)) {
      if (k === RESERVED_KEY) return p;
      stack.push([(v as Record<string, unknown>)[k], `${p}.${k}`]);
    }
  }
  return undefined;
}

/** The message a writer gives for a user value holding the reserved key. */
export function reservedKeyMessage(path: string): string {
  return `${path} has the reserved key "${RESERVED_KEY}": rename it (Triad marks its object references with it)`;
}

/**
 * The object store bucket of one client of a namespace: `triad_<length of ns>_<ns>_<client>` (the length
 * makes it unambiguous: namespaces and client names may both contain `_`).
 */
export function objectBucket(namespace: string, client: string): string {
  if (!NAMESPACE_PATTERN.test(namespace)) throw new Error(`invalid namespace "${namespace}"`);
  if (!NAME_PATTERN.test(client)) throw new Error(`invalid client id "${client}"`);
  return `triad_${namespace.length}_${namespace}_${client}`;
}

/** The client whose bucket `bucket` is in `namespace`, or undefined when it is not one of the namespace's. */
export function bucketClient(namespace: string, bucket: string): string | undefined {
  const prefix = `triad_${namespace.length}_${namespace}_`;
  if (!bucket.startsWith(prefix)) return undefined;
  const client = bucket.slice(prefix.length);
  return NAME_PATTERN.test(client) ? client : undefined;
}

/** Upload ids (the last token of an input's object name): what a NATS nuid is. */
export const UPLOAD_ID_PATTERN = /^[0-9A-Za-z]{1,40}$/;

/** The object name of a task's input: `<taskId>/in/<upload>`. */
export function inputObjectName(taskId: string, upload: string): string {
  return `${taskId}/in/${upload}`;
}

/** Whether `name` is an input object name of task `taskId`. */
export function isInputObjectOf(name: string, taskId: string): boolean {
  const prefix = `${taskId}/in/`;
  return name.startsWith(prefix) && UPLOAD_ID_PATTERN.test(name.slice(prefix.length));
}

/**
 * The prefix of an output object's name for one result: `<taskId>/<step>[#<i>]/<kind>/<attempt>/`; the
 * writer appends a unique id, so two runs of one attempt never overwrite each other's object.
 */
export function outputObjectPrefix(taskId: string, step: string, kind: string, attempt: number, item?: number): string {
  return `${taskId}/${step}${item !== undefined ? `#${item}` : ''}/${kind}/${attempt}/`;
}

/** Whether `name` is an output object of exactly this result (its prefix, then an upload id). */
export function isOutputObjectOf(name: string, prefix: string): boolean {
  return name.startsWith(prefix) && UPLOAD_ID_PATTERN.test(name.slice(prefix.length));
}

/** Every object reference in a decoded value, at any depth (a fan-out's output array holds one per element). */
export function objectRefsIn(value: unknown): ObjectRef[] {
  const out: ObjectRef[] = [];
  const stack: unknown[] = [value];
  for (let v = stack.pop(); v !== undefined || stack.length > 0; v = stack.pop()) {
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) continue;
    if (isTriadValue(v)) {
      const r = ObjectRefSchema.safeParse(v);
      if (r.success) out.push(r.data);
      continue;
    }
    if (Array.isArray(v)) stack.push(...(v as readonly unknown[]));
    else stack.push(...(Object.values(v) as unknown[]));
  }
  return out;
}

const UploadIdSchema = z.string().regex(UPLOAD_ID_PATTERN, 'upload is 1-40 letters or digits (a nuid)');

/**
 * `payload.put`: one part of a task input's upload through a scheduler (a client's account has no
 * JetStream, decision 0022). Parts are sent in order, 0 first; the last one carries `last` and the reply
 * is then the reference. On `api.client.<c>.payload.put` the bucket is `c`'s; on `api.payload.put`
 * (operators, unsecured deployments) `client` names it.
 */
export const PayloadPutRequestSchema = z.object({
  taskId: z.string().regex(TASK_ID_PATTERN, 'a task id is 1-128 letters, digits, "_", "-" or ":"'),
  upload: UploadIdSchema,
  part: z.number().int().min(0).max(1_000_000),
  data: z.instanceof(Uint8Array).refine((d) => d.length <= OBJECT_CHUNK_BYTES, `a part is at most ${OBJECT_CHUNK_BYTES} bytes`),
  last: z
    .object({ parts: z.number().int().min(1), size: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) })
    .optional(),
  client: z.string().regex(NAME_PATTERN).optional(),
});
export const PayloadPutReplySchema = z.object({ part: z.number().int(), ref: ObjectRefSchema.optional() });

/**
 * `payload.get`: one chunk of an object through a scheduler. The first request names the object; the
 * reply says its `nuid` and the stream sequence `next` to ask from; the reader stops once it holds the
 * reference's `size` bytes (and checks its SHA-256).
 */
export const PayloadGetRequestSchema = z.object({
  bucket: z.string().max(120),
  name: z.string().min(1).max(400),
  nuid: z.string().regex(UPLOAD_ID_PATTERN).optional(),
  from: z.number().int().min(1).optional(),
});
export const PayloadGetReplySchema = z.object({
  nuid: z.string(),
  size: z.number().int().nonnegative(),
  data: z.instanceof(Uint8Array),
  next: z.number().int().min(1),
});
