/**
 * Large payloads in the JetStream object store (decision 0021 §4): one bucket per client of a namespace,
 * written with `@nats-io/obj` (ADR-20's layout: chunks on `$O.<bucket>.C.<nuid>`, metadata on
 * `$O.<bucket>.M.<base64url name>`). Chunks are read back one stored message at a time (message get with
 * `next_by_subj`), so a reader needs no consumer — the same read serves an agent, the scheduler's payload
 * broker (clients have no JetStream, decision 0022) and the supervisor. Every read is checked against
 * the reference's size and SHA-256.
 */
import { createHash } from 'node:crypto';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { StorageType } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import {
  DEFAULT_MAX_OBJECT_BYTES,
  ErrorCode,
  OBJECT_CHUNK_BYTES,
  ObjectRefSchema,
  TriadError,
  encode,
  errorMessage,
  isTriadValue,
  reservedKeyMessage,
  reservedKeyPath,
  unpackTrusted,
  objectBucket,
  objectRef,
  type ObjectRef,
} from '@triad/protocol';
import type { Bus } from './connection.js';
import { streamReplicas } from './topology.js';

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** "80.0 MiB" */
export function mib(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
}

/** ADR-20's metadata subject token: the name in padded base64url. */
function metaToken(name: string): string {
  return Buffer.from(name, 'utf8').toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
}

interface StoredInfo {
  name: string;
  nuid: string;
  size: number;
  chunks: number;
  deleted?: boolean;
}

export interface PayloadStoreOptions {
  /** Largest object read or written (TRIAD_MAX_OBJECT_BYTES). */
  maxObjectBytes?: number;
  replicas?: number;
  /** TRIAD_OBJECT_BUCKET_MAX_BYTES: the bucket's size limit (-1: none). */
  bucketMaxBytes?: number;
}

export class PayloadStore {
  private readonly objm: Objm;
  private readonly ensured = new Map<string, Promise<void>>();
  private readonly opened = new Map<string, Promise<ObjectStore>>();
  readonly maxObjectBytes: number;

  constructor(
    private readonly bus: Bus,
    private readonly o: PayloadStoreOptions = {},
  ) {
    this.objm = new Objm(bus.js);
    this.maxObjectBytes = o.maxObjectBytes ?? DEFAULT_MAX_OBJECT_BYTES;
  }

  bucketOf(client: string): string {
    return objectBucket(this.bus.names.namespace, client);
  }

  /** Creates the client's bucket when it is missing (once per process; a failure is tried again next time). */
  ensureBucket(client: string): Promise<void> {
    const bucket = this.bucketOf(client);
    let p = this.ensured.get(bucket);
    if (!p) {
      p = this.objm
        .create(bucket, {
          storage: StorageType.File,
          replicas: this.o.replicas ?? streamReplicas(),
          ...(this.o.bucketMaxBytes !== undefined && this.o.bucketMaxBytes > 0 ? { max_bytes: this.o.bucketMaxBytes } : {}),
        })
        .then(
          () => undefined,
          (e: unknown) => {
            this.ensured.delete(bucket);
            throw new TriadError(ErrorCode.Unavailable, `cannot create the object store bucket ${bucket} (${errorMessage(e)}); check that JetStream is enabled and this identity may create it`, { cause: e });
          },
        );
      this.ensured.set(bucket, p);
    }
    return p;
  }

  private open(bucket: string): Promise<ObjectStore> {
    let p = this.opened.get(bucket);
    if (!p) {
      // No stream info: the bucket exists (the scheduler ensures it before a task exists) or the write fails.
      p = this.objm.open(bucket, false);
      this.opened.set(bucket, p);
    }
    return p;
  }

  /** Stores `bytes` (one msgpack value) as object `name` of `bucket`; the reference to it. */
  async put(bucket: string, name: string, bytes: Uint8Array): Promise<ObjectRef> {
    if (bytes.length > this.maxObjectBytes) {
      throw new TriadError(ErrorCode.PayloadTooLarge, `the payload is ${mib(bytes.length)}; at most ${mib(this.maxObjectBytes)} (TRIAD_MAX_OBJECT_BYTES)`);
    }
    const os = await this.open(bucket);
    try {
      await os.putBlob({ name, options: { max_chunk_size: OBJECT_CHUNK_BYTES } }, bytes);
    } catch (e) {
      throw new TriadError(ErrorCode.Unavailable, `cannot store object ${name} in bucket ${bucket} (${errorMessage(e)}); try again`, { cause: e });
    }
    return objectRef(bucket, name, bytes.length, sha256Hex(bytes));
  }

  private async info(bucket: string, name: string): Promise<StoredInfo | undefined> {
    const m = await this.getMessage(bucket, { last_by_subj: `$O.${bucket}.M.${metaToken(name)}` });
    if (!m) return undefined;
    const info = JSON.parse(new TextDecoder().decode(m.data)) as StoredInfo;
    return info.deleted ? undefined : info;
  }

  private async getMessage(bucket: string, q: Record<string, unknown>): Promise<{ seq: number; data: Uint8Array } | undefined> {
    try {
      const m = await this.bus.jsm.streams.getMessage(`OBJ_${bucket}`, q as unknown as { seq: number });
      return m ?? undefined;
    } catch (e) {
      const msg = errorMessage(e);
      if (/no message found|stream not found/i.test(msg)) return undefined;
      throw new TriadError(ErrorCode.Unavailable, `cannot read the object store bucket ${bucket} (${msg}); try again`, { cause: e });
    }
  }

  /**
   * One stored chunk of object `name`: from the start, or from stream sequence `from` of the upload
   * `nuid` a previous call returned. Throws NOT_FOUND-like errors with the reason.
   */
  async readChunk(bucket: string, name: string, at?: { nuid: string; from: number }): Promise<{ nuid: string; size: number; data: Uint8Array; next: number }> {
    let nuid = at?.nuid;
    let size = 0;
    if (!at) {
      const info = await this.info(bucket, name);
      if (!info) throw missing(bucket, name);
      nuid = info.nuid;
      size = info.size;
    }
    const m = await this.getMessage(bucket, { seq: at?.from ?? 1, next_by_subj: `$O.${bucket}.C.${nuid ?? ''}` });
    if (!m) {
      if (size === 0 && !at) return { nuid: nuid ?? '', size, data: new Uint8Array(0), next: 1 };
      throw new TriadError(ErrorCode.InvalidState, `object ${name} of bucket ${bucket} is incomplete (a chunk is missing): it was deleted or is being replaced`);
    }
    return { nuid: nuid ?? '', size, data: m.data, next: m.seq + 1 };
  }

  /** The bytes a reference points to, checked against its size and SHA-256. */
  async read(ref: ObjectRef, maxBytes = this.maxObjectBytes): Promise<Uint8Array> {
    if (ref.size > maxBytes) {
      throw new TriadError(ErrorCode.PayloadTooLarge, `object ${ref.name} is ${mib(ref.size)}, above this reader's TRIAD_MAX_OBJECT_BYTES (${mib(maxBytes)})`);
    }
    return readObject(ref, (at) => this.readChunk(ref.bucket, ref.name, at));
  }

  /**
   * One part of a brokered upload (the payload broker, for clients without JetStream): published as chunk
   * `part` of upload `upload`, deduplicated by message id, so a part sent again after a lost reply is stored once.
   */
  async putPart(bucket: string, upload: string, part: number, data: Uint8Array): Promise<void> {
    try {
      await this.bus.js.publish(`$O.${bucket}.C.${upload}`, data, { msgID: `${upload}.${part}` });
    } catch (e) {
      throw new TriadError(ErrorCode.Unavailable, `cannot store part ${part} of upload ${upload} in bucket ${bucket} (${errorMessage(e)}); send it again`, { cause: e });
    }
  }

  /**
   * Ends a brokered upload: checks that `parts` chunks are stored under it and writes the object's metadata
   * (ADR-20: name, bucket, nuid, size, chunks, mtime, digest `SHA-256=<padded base64url>`), with the
   * subject roll-up header, as `@nats-io/obj` writes it. The reference to the object.
   */
  async commit(bucket: string, name: string, upload: string, parts: number, size: number, sha256: string): Promise<ObjectRef> {
    if (size > this.maxObjectBytes) {
      throw new TriadError(ErrorCode.PayloadTooLarge, `the payload is ${mib(size)}; at most ${mib(this.maxObjectBytes)} (TRIAD_MAX_OBJECT_BYTES)`);
    }
    const chunkSubject = `$O.${bucket}.C.${upload}`;
    let stored = 0;
    try {
      const si = await this.bus.jsm.streams.info(`OBJ_${bucket}`, { subjects_filter: chunkSubject });
      stored = si.state.subjects?.[chunkSubject] ?? 0;
    } catch (e) {
      throw new TriadError(ErrorCode.Unavailable, `cannot read the object store bucket ${bucket} (${errorMessage(e)}); try again`, { cause: e });
    }
    if (stored !== parts) {
      throw new TriadError(ErrorCode.InvalidMessage, `upload ${upload} has ${stored} parts stored, not ${parts}: send every part, in order, before the last`);
    }
    const info = {
      name,
      description: '',
      options: { max_chunk_size: OBJECT_CHUNK_BYTES },
      bucket,
      nuid: upload,
      size,
      chunks: parts,
      mtime: new Date().toISOString(),
      digest: `SHA-256=${Buffer.from(sha256, 'hex').toString('base64').replace(/\+/g, '-').replace(/\//g, '_')}`,
      deleted: false,
    };
    const h = natsHeaders();
    h.set('Nats-Rollup', 'sub');
    try {
      await this.bus.js.publish(`$O.${bucket}.M.${metaToken(name)}`, JSON.stringify(info), { headers: h });
    } catch (e) {
      throw new TriadError(ErrorCode.Unavailable, `cannot store the metadata of object ${name} in bucket ${bucket} (${errorMessage(e)}); try again`, { cause: e });
    }
    return objectRef(bucket, name, size, sha256);
  }

  /** The object store buckets of this namespace's clients (their streams' names, read from JetStream). */
  async buckets(): Promise<string[]> {
    const prefix = `OBJ_triad_${this.bus.names.namespace.length}_${this.bus.names.namespace}_`;
    const out: string[] = [];
    for await (const name of this.bus.jsm.streams.names()) if (name.startsWith(prefix)) out.push(name.slice(4));
    return out;
  }

  /**
   * The first metadata message of `bucket` after stream sequence `after` (the object GC's walk, decision
   * 0021 §4.6): its sequence and the object's name, time and whether it is a delete marker.
   */
  async metaAfter(bucket: string, after: number): Promise<{ seq: number; name: string; mtime: number; deleted: boolean } | undefined> {
    const m = await this.getMessage(bucket, { seq: after + 1, next_by_subj: `$O.${bucket}.M.>` });
    if (!m) return undefined;
    const info = JSON.parse(new TextDecoder().decode(m.data)) as { name?: string; mtime?: string; deleted?: boolean };
    return { seq: m.seq, name: info.name ?? '', mtime: info.mtime ? Date.parse(info.mtime) : 0, deleted: info.deleted === true };
  }

  /** Deletes an object (a delete marker and a purge of its chunks); false when there was none. */
  async delete(bucket: string, name: string): Promise<boolean> {
    try {
      const os = await this.open(bucket);
      const r = await os.delete(name);
      return r.success || r.purged > 0;
    } catch (e) {
      const msg = errorMessage(e);
      if (/stream not found|not found/i.test(msg)) return false;
      throw new TriadError(ErrorCode.Unavailable, `cannot delete object ${name} of bucket ${bucket} (${msg}); it is deleted on a later pass`, { cause: e });
    }
  }
}

function missing(bucket: string, name: string): TriadError {
  return new TriadError(ErrorCode.InvalidState, `object ${name} is not in bucket ${bucket}: it was deleted with its task (retention) or never stored`);
}

/**
 * Reads a whole object chunk by chunk with `readChunk` (direct, or through the payload broker), and checks
 * it against the reference: its size, then its SHA-256.
 */
export async function readObject(
  ref: ObjectRef,
  readChunk: (at?: { nuid: string; from: number }) => Promise<{ nuid: string; size: number; data: Uint8Array; next: number }>,
): Promise<Uint8Array> {
  const out = Buffer.allocUnsafe(ref.size);
  let have = 0;
  let at: { nuid: string; from: number } | undefined;
  const first = await readChunk();
  if (first.size !== ref.size) {
    throw new TriadError(ErrorCode.InvalidState, `object ${ref.name} is corrupt or was replaced (it holds ${first.size} bytes, the reference says ${ref.size})`);
  }
  for (let c = first; ; c = await readChunk(at)) {
    if (have + c.data.length > ref.size) throw new TriadError(ErrorCode.InvalidState, `object ${ref.name} is corrupt or was replaced (more bytes than its size)`);
    out.set(c.data, have);
    have += c.data.length;
    if (have >= ref.size) break;
    at = { nuid: c.nuid, from: c.next };
  }
  if (sha256Hex(out) !== ref.sha256) throw new TriadError(ErrorCode.InvalidState, `object ${ref.name} is corrupt or was replaced (sha256 mismatch)`);
  return out;
}

/**
 * A payload as a writer sends it (decision 0021 §4.1): the value itself when its msgpack encoding is at
 * most `inlineMaxBytes`, else the reference `upload` returns for the encoded bytes. A value holding the
 * reserved key `$triad` anywhere is refused (`what` names it in the message: `input`, `output`).
 */
export async function offloadValue(value: unknown, what: string, inlineMaxBytes: number, upload: (bytes: Uint8Array) => Promise<ObjectRef>): Promise<unknown> {
  const at = reservedKeyPath(value, what);
  if (at !== undefined) throw new TriadError(ErrorCode.InvalidMessage, reservedKeyMessage(at));
  if (value === undefined) return value;
  const bytes = encode(value, Number.MAX_SAFE_INTEGER);
  if (bytes.length <= inlineMaxBytes) return value;
  return upload(bytes);
}

/**
 * offloadValue's answer already encoded: the bytes of what a writer sends (the value's own encoding when
 * inline, else the reference's), undefined for an undefined value — so the value is encoded once, not
 * once to measure it and again inside its message (decision 0025).
 */
export async function offloadEncoded(value: unknown, what: string, inlineMaxBytes: number, upload: (bytes: Uint8Array) => Promise<ObjectRef>): Promise<Uint8Array | undefined> {
  const at = reservedKeyPath(value, what);
  if (at !== undefined) throw new TriadError(ErrorCode.InvalidMessage, reservedKeyMessage(at));
  if (value === undefined) return undefined;
  const bytes = encode(value, Number.MAX_SAFE_INTEGER);
  if (bytes.length <= inlineMaxBytes) return bytes;
  return encode(await upload(bytes));
}

/**
 * `value` with every object reference in it, at any depth, replaced by the value stored in its object
 * (`download` fetches and checks the bytes). A Triad value this version does not know is an error.
 * A value with no Triad value in it — almost every one — is returned as it is after one synchronous walk.
 */
export function resolveRefs(value: unknown, download: (ref: ObjectRef) => Promise<Uint8Array>): Promise<unknown> {
  return holdsTriadValue(value) ? resolveIn(value, download) : Promise.resolve(value);
}

async function resolveIn(value: unknown, download: (ref: ObjectRef) => Promise<Uint8Array>): Promise<unknown> {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || value instanceof Date) return value;
  if (isTriadValue(value)) {
    if (value.$triad !== 'object') throw new TriadError(ErrorCode.InvalidMessage, `unknown Triad value "${String(value.$triad)}": this reader is older than its writer`);
    const ref = ObjectRefSchema.safeParse(value);
    if (!ref.success) throw new TriadError(ErrorCode.InvalidMessage, `an invalid object reference: ${ref.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    return unpackTrusted(await download(ref.data));
  }
  if (Array.isArray(value)) {
    const out = await Promise.all(value.map((v) => resolveIn(v, download)));
    return out.some((v, i) => v !== value[i]) ? out : value;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    const w = await resolveIn(v, download);
    if (w !== v) (out ??= { ...(value as Record<string, unknown>) })[k] = w;
  }
  return out ?? value;
}

/** Whether a Triad value (`$triad` first) is anywhere in `value`, where resolveRefs looks: arrays and plain objects. Iterative. */
function holdsTriadValue(value: unknown): boolean {
  const stack: unknown[] = [value];
  for (let v = stack.pop(); stack.length > 0 || v !== undefined; v = stack.pop()) {
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v) || v instanceof Date) continue;
    if (isTriadValue(v)) return true;
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
      continue;
    }
    if (Object.getPrototypeOf(v) !== Object.prototype) continue;
    for (const k in v) stack.push((v as Record<string, unknown>)[k]);
  }
  return false;
}
