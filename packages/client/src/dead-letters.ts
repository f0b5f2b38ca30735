/**
 * Dead letters for operators: reading the namespace's DLQ stream (newest first, optionally of one
 * source) with each original decoded where it can be, and replaying one to the subject it came from.
 */
import { headers as natsHeaders } from '@nats-io/nats-core';
import type { Bus } from '@triad/bus';
import { DeadLetterSchema, ErrorCode, TriadError, decode, errorMessage, unpackUntrusted, type DeadLetter } from '@triad/protocol';

/** Room for a dead letter of a message at the protocol's size limit, plus its envelope. */
const MAX_DEAD_LETTER_BYTES = 3_000_000;
/** How many stream messages one listing looks at, at most (the newest ones). */
const MAX_SCANNED = 10_000;
/** How many bytes of an undecodable original the preview shows. */
const PREVIEW_BYTES = 256;

/** The original message as far as it can be read: its msgpack value, or a preview of its bytes. */
export type DecodedOriginal =
  | { format: 'msgpack'; bytes: number; value: unknown }
  | { format: 'bytes'; bytes: number; error: string; hex: string; base64: string; truncated: boolean };

/** A dead letter as stored: its stream sequence (what `replay` takes) and its decoded original. */
export interface StoredDeadLetter {
  seq: number;
  /** The dead letter's own subject (`triad.<ns>.dlq.<token>`). */
  dlqSubject: string;
  source: string;
  reason: string;
  receivedAt: number;
  deliveries: number;
  /** The subject the original arrived on, when the writer recorded it. */
  subject?: string;
  headers?: Record<string, string>;
  original: DecodedOriginal;
}

export interface DeadLetterQuery {
  /** Only dead letters of this source (`submit`, `result`, `command`, `step.<agent>`; `step_<agent>` works too). */
  source?: string;
  /** At most this many, newest first (default 100). */
  limit?: number;
}

export interface ReplayResult {
  seq: number;
  subject: string;
  /** JetStream's answer: the stream and sequence the replayed message was stored at. */
  stream: string;
  storedSeq: number;
  /** True when this dead letter was replayed within the stream's duplicate window already (nothing sent). */
  duplicate: boolean;
}

/** The subject token of a source, as dead-letter subjects write it (docs/protocol.md §7). */
export function sourceToken(source: string): string {
  return source.replace(/[.*>\s]/g, '_');
}

/** Reads the original bytes: msgpack values come back as plain values (binary as base64), else a byte preview. */
export function decodeOriginal(bytes: Uint8Array): DecodedOriginal {
  const d = unpackUntrusted(bytes, 'the original message');
  if (d.ok) return { format: 'msgpack', bytes: bytes.length, value: plain(d.value) };
  const head = bytes.subarray(0, PREVIEW_BYTES);
  return {
    format: 'bytes',
    bytes: bytes.length,
    error: d.error.message,
    hex: Buffer.from(head).toString('hex'),
    base64: Buffer.from(head).toString('base64'),
    truncated: bytes.length > PREVIEW_BYTES,
  };
}

/** A decoded value made JSON-safe: bytes as `{ base64 }`, BigInts as strings, Maps as objects. */
function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return { base64: Buffer.from(v).toString('base64') };
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return Object.fromEntries([...v.entries()].map(([k, x]) => [String(k), plain(x)]));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** The namespace's dead letters, newest first. */
export async function listDeadLetters(bus: Bus, q: DeadLetterQuery = {}): Promise<StoredDeadLetter[]> {
  const stream = bus.names.streams.deadLetters;
  const limit = q.limit ?? 100;
  const wanted = q.source === undefined ? undefined : bus.names.subjects.deadLetter(sourceToken(q.source));
  let info;
  try {
    info = await bus.jsm.streams.info(stream);
  } catch (e) {
    throw unreadable(bus, e);
  }
  const out: StoredDeadLetter[] = [];
  const first = info.state.first_seq;
  for (let seq = info.state.last_seq, scanned = 0; seq >= first && seq > 0 && out.length < limit && scanned < MAX_SCANNED; seq--, scanned++) {
    // A message removed by age between the info and the get is simply skipped.
    const m = await bus.jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
    if (!m || (wanted !== undefined && m.subject !== wanted)) continue;
    out.push(stored(m.seq, m.subject, m.data));
  }
  return out;
}

/** One dead letter by its stream sequence. */
export async function getDeadLetter(bus: Bus, seq: number): Promise<StoredDeadLetter & { raw: DeadLetter }> {
  const stream = bus.names.streams.deadLetters;
  let m;
  try {
    m = await bus.jsm.streams.getMessage(stream, { seq });
  } catch (e) {
    if (/no message found|not found/i.test(errorMessage(e))) {
      throw new TriadError(ErrorCode.InvalidMessage, `no dead letter at sequence ${seq} in ${stream} (removed by age, or never written): list them with triad dlq`);
    }
    throw unreadable(bus, e);
  }
  if (!m) throw new TriadError(ErrorCode.InvalidMessage, `no dead letter at sequence ${seq} in ${stream}: list them with triad dlq`);
  const d = decode(m.data, DeadLetterSchema, `dead letter ${seq}`, MAX_DEAD_LETTER_BYTES);
  if (!d.ok) throw new TriadError(ErrorCode.InvalidMessage, `message ${seq} of ${stream} is not a dead letter: ${d.error.message}`);
  return { ...stored(m.seq, m.subject, m.data), raw: d.value };
}

/**
 * Re-publishes a dead letter's original bytes to the subject it arrived on, with its headers but a
 * message id of its own (`triad-dlq-replay:<seq>`): the original's id would be dropped as a duplicate
 * inside the stream's window, and a replay repeated by mistake inside it is dropped instead.
 */
export async function replayDeadLetter(bus: Bus, seq: number): Promise<ReplayResult> {
  const dl = await getDeadLetter(bus, seq);
  const subject = dl.subject ?? subjectFromSource(bus, dl.source);
  if (subject === undefined) {
    throw new TriadError(
      ErrorCode.InvalidState,
      `dead letter ${seq} (source ${dl.source}) does not record the subject it arrived on (written by an older process), and its source does not name one: re-publish its original by hand`,
    );
  }
  const h = natsHeaders();
  for (const [k, v] of Object.entries(dl.headers ?? {})) if (k !== 'Nats-Msg-Id' && !k.startsWith('Nats-Expected')) h.set(k, v);
  try {
    const ack = await bus.js.publish(subject, dl.raw.original, { headers: h, msgID: `triad-dlq-replay:${seq}` });
    return { seq, subject, stream: ack.stream, storedSeq: ack.seq, duplicate: ack.duplicate };
  } catch (e) {
    throw new TriadError(ErrorCode.Unavailable, `dead letter ${seq} could not be re-published to ${subject} (${errorMessage(e)}): is a scheduler running (it creates the streams), and may this identity publish there?`, {
      cause: e,
    });
  }
}

/** The subject a source's messages arrive on, where the source alone says it (a step request's, a command's). */
function subjectFromSource(bus: Bus, source: string): string | undefined {
  if (source === 'command') return bus.names.subjects.command;
  const step = /^step\.([A-Za-z][A-Za-z0-9_-]*)$/.exec(source);
  return step?.[1] ? bus.names.subjects.step(step[1]) : undefined;
}

function stored(seq: number, dlqSubject: string, data: Uint8Array): StoredDeadLetter {
  const d = decode(data, DeadLetterSchema, `dead letter ${seq}`, MAX_DEAD_LETTER_BYTES);
  if (!d.ok) {
    // Something that is not a dead letter on a dlq subject: shown as what it is rather than hidden.
    return { seq, dlqSubject, source: '?', reason: `not a dead letter: ${d.error.message}`, receivedAt: 0, deliveries: 0, original: decodeOriginal(data) };
  }
  const v = d.value;
  return {
    seq,
    dlqSubject,
    source: v.source,
    reason: v.reason,
    receivedAt: v.receivedAt,
    deliveries: v.deliveries,
    ...(v.subject !== undefined ? { subject: v.subject } : {}),
    ...(v.headers !== undefined ? { headers: v.headers } : {}),
    original: decodeOriginal(v.original),
  };
}

function unreadable(bus: Bus, e: unknown): TriadError {
  const msg = errorMessage(e);
  if (/stream not found/i.test(msg)) {
    return new TriadError(ErrorCode.Unavailable, `no dead-letter stream ${bus.names.streams.deadLetters} (${msg}): has a scheduler run in namespace "${bus.names.namespace}"? It creates the streams.`, { cause: e });
  }
  return new TriadError(
    ErrorCode.Unavailable,
    `cannot read the dead letters of namespace "${bus.names.namespace}" (${msg}): reading them needs the operator role (JetStream access to ${bus.names.streams.deadLetters})`,
    { cause: e },
  );
}
