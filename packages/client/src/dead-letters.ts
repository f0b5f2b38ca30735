/**
 * Dead letters for operators: reading the namespace's DLQ stream (newest first, optionally of one
 * source) with each original decoded where it can be, and replaying one to its own source — the subject
 * its DLQ subject implies, never one its body names — with who may have written it (decision 0022).
 */
import { headers as natsHeaders } from '@nats-io/nats-core';
import { explainPermissionViolation, isLeaderChange, type Bus } from '@triad/bus';
import { DeadLetterSchema, ErrorCode, NAME_PATTERN, TriadError, decode, errorMessage, unpackUntrusted, type DeadLetter, type Names } from '@triad/protocol';
import { rolesAllowed } from '@triad/permissions';

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

/** What replaying a dead letter publishes, or why it is not replayed (decision 0022). */
export type ReplayPlan =
  | {
      ok: true;
      /** The source's subject: where the original goes. */
      subject: string;
      /** The stream that must store it. */
      stream: string;
      /** The headers re-sent with it (the protocol's and trace context only). */
      headers: Record<string, string>;
      /** Its message id: a replay repeated inside the duplicate window is dropped. */
      msgId: string;
    }
  | { ok: false; reason: string };

/** Who may have written a dead letter: the roles that may publish its DLQ subject, and what that means for a replay. */
export interface DeadLetterWriter {
  roles: string[];
  /**
   * Set when a role other than the scheduler and supervisor may have written it and may not itself
   * publish where a replay would: the letter is only that identity's word.
   */
  warning?: string;
}

/** A dead letter as stored: its stream sequence (what `replay` takes) and its decoded original. */
export interface StoredDeadLetter {
  seq: number;
  /** The dead letter's own subject (`triad.<ns>.dlq.<token>`): who wrote it. */
  dlqSubject: string;
  source: string;
  reason: string;
  receivedAt: number;
  deliveries: number;
  /** The subject the original arrived on, as its writer recorded it. */
  subject?: string;
  headers?: Record<string, string>;
  original: DecodedOriginal;
  writer: DeadLetterWriter;
  replay: ReplayPlan;
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
  /** True when this dead letter was replayed within the stream's duplicate window already (nothing stored again). */
  duplicate: boolean;
  headers: Record<string, string>;
  msgId: string;
}

/** Headers a replay re-sends: the protocol's own and trace context; never a `Nats-*` one (message ids, expectations, rollups). */
const REPLAYED_HEADERS = new Set(['triad-protocol', 'triad-reply-to', 'traceparent', 'tracestate']);

/** Roles that hold the namespace's Redis: their dead letters are as trustworthy as the namespace itself. */
const TRUSTED_WRITERS = new Set(['scheduler', 'supervisor']);

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
    out.push(stored(bus.names, m.seq, m.subject, m.data));
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
  return { ...stored(bus.names, m.seq, m.subject, m.data), raw: d.value };
}

/**
 * Re-publishes a dead letter's original bytes to its own source (its `replay` plan), with the protocol's
 * headers but a message id of its own (`triad-dlq-replay:<seq>`): the original's id would be dropped as a
 * duplicate inside the stream's window, and a replay repeated by mistake inside it is dropped instead.
 * Reports what JetStream stored, and fails unless the source's own stream stored it.
 */
export async function replayDeadLetter(bus: Bus, seq: number, o: { expectSubject?: string } = {}): Promise<ReplayResult> {
  const dl = await getDeadLetter(bus, seq);
  const plan = dl.replay;
  if (!plan.ok) throw new TriadError(ErrorCode.InvalidState, `dead letter ${seq} is not replayed: ${plan.reason}`);
  if (o.expectSubject !== undefined && o.expectSubject !== plan.subject) {
    throw new TriadError(ErrorCode.InvalidState, `dead letter ${seq} would be replayed to ${plan.subject}, not to ${o.expectSubject} as shown: nothing was published; look at it again`);
  }
  const h = natsHeaders();
  for (const [k, v] of Object.entries(plan.headers)) h.set(k, v);
  let ack;
  try {
    ack = await bus.js.publish(plan.subject, dl.raw.original, { headers: h, msgID: plan.msgId });
  } catch (e) {
    const refused = explainPermissionViolation(e, bus.names.namespace);
    if (refused) throw new TriadError(ErrorCode.InvalidConfig, `dead letter ${seq} was not replayed: ${refused.message}`, { cause: e });
    if (isLeaderChange(e)) {
      throw new TriadError(
        ErrorCode.Unavailable,
        `dead letter ${seq}: no answer from JetStream for ${plan.subject} (${errorMessage(e)}), so whether ${plan.stream} stored it is unknown; replaying it again within 2 minutes is harmless (same message id)`,
        { cause: e },
      );
    }
    throw new TriadError(ErrorCode.Unavailable, `dead letter ${seq} was not replayed to ${plan.subject} (${errorMessage(e)}): is a scheduler running (it creates the streams)?`, { cause: e });
  }
  if (ack.stream !== plan.stream) {
    throw new TriadError(ErrorCode.InvalidState, `dead letter ${seq} was published to ${plan.subject} but stored in stream ${ack.stream} (#${ack.seq}), not ${plan.stream}: check the streams' subjects`);
  }
  return { seq, subject: plan.subject, stream: ack.stream, storedSeq: ack.seq, duplicate: ack.duplicate, headers: plan.headers, msgId: plan.msgId };
}

/**
 * Where a dead letter replays to: the source its DLQ subject names (`dlq.submit` → the submission's
 * `submit.<client>`, `dlq.result` → `result.<agent>`, `dlq.command`, `dlq.step_<agent>` → `step.<agent>`, or `step.b~<agent>` for a whole batch),
 * never an API subject, and only if the letter's body agrees (its `source`, its recorded subject).
 */
export function replayPlan(n: Names, seq: number, dlqSubject: string, v: DeadLetter | undefined): ReplayPlan {
  const prefix = `triad.${n.namespace}.dlq.`;
  if (!v) return { ok: false, reason: 'it is not a dead letter' };
  if (!dlqSubject.startsWith(prefix)) return { ok: false, reason: `${dlqSubject} is no dead-letter subject of namespace "${n.namespace}"` };
  const token = dlqSubject.slice(prefix.length);
  if (sourceToken(v.source) !== token) {
    return { ok: false, reason: `its body says source "${v.source}", but it was written on ${dlqSubject}: forged or corrupt` };
  }
  const recorded = v.subject;
  const s = n.subjects;
  let target: { subject: string; stream: string } | undefined;
  if (token === 'submit') {
    if (recorded === undefined || n.submitter(recorded) === undefined) return { ok: false, reason: noSource(recorded, `a submission subject (${s.submit('<client>')})`) };
    target = { subject: recorded, stream: n.streams.submit };
  } else if (token === 'result') {
    if (recorded === undefined || n.resultAgent(recorded) === undefined) return { ok: false, reason: noSource(recorded, `a result subject (${s.result('<agent>')})`) };
    target = { subject: recorded, stream: n.streams.results };
  } else if (token === 'command') {
    target = { subject: s.command, stream: n.streams.commands };
  } else if (token.startsWith('step_') && NAME_PATTERN.test(token.slice(5))) {
    // A whole step request batch (unreadable, or past the redelivery limit) goes back to its batch
    // subject (decision 0023); a single request, or one item of a batch, to the agent's own subject.
    const agent = token.slice(5);
    target = { subject: recorded === s.stepBatch(agent) ? recorded : s.step(agent), stream: n.streams.steps };
  } else if (token === 'api') {
    return { ok: false, reason: 'an API request is answered once, to its requester, and never replayed: send it again' };
  } else {
    return { ok: false, reason: `${dlqSubject} names no source a replay can go to (submit, result, command, step_<agent>)` };
  }
  if (recorded !== undefined && recorded !== target.subject) {
    return { ok: false, reason: `it records subject ${recorded}, which is not its source's (${target.subject}): forged or corrupt` };
  }
  const headers: Record<string, string> = {};
  for (const [k, val] of Object.entries(v.headers ?? {})) if (REPLAYED_HEADERS.has(k.toLowerCase())) headers[k] = val;
  return { ok: true, ...target, headers, msgId: `triad-dlq-replay:${seq}` };
}

function noSource(recorded: string | undefined, what: string): string {
  return recorded === undefined ? `it records no subject (an older writer): re-publish its original by hand` : `it records subject ${recorded}, which is not ${what}: forged or corrupt`;
}

/**
 * Who may have written a letter on `dlqSubject` (the role table), and a warning when one of them — not
 * the scheduler or supervisor — may not publish on the replay's target itself.
 */
export function deadLetterWriter(n: Names, dlqSubject: string, plan: ReplayPlan): DeadLetterWriter {
  const roles = rolesAllowed(n.namespace, 'publish', dlqSubject);
  if (!plan.ok) return { roles };
  const mayPublishTarget = new Set(rolesAllowed(n.namespace, 'publish', plan.subject));
  const lesser = roles.filter((r) => !TRUSTED_WRITERS.has(r) && !mayPublishTarget.has(r));
  if (lesser.length === 0) return { roles };
  return {
    roles,
    warning: `written on ${dlqSubject}, which ${lesser.join(', ')} may publish, but ${lesser.length > 1 ? 'they' : 'that identity'} may not publish on ${plan.subject}: its content is only ${lesser.join(', ')}'s word`,
  };
}

function stored(n: Names, seq: number, dlqSubject: string, data: Uint8Array): StoredDeadLetter {
  const d = decode(data, DeadLetterSchema, `dead letter ${seq}`, MAX_DEAD_LETTER_BYTES);
  if (!d.ok) {
    // Something that is not a dead letter on a dlq subject: shown as what it is rather than hidden.
    const replay: ReplayPlan = { ok: false, reason: `it is not a dead letter: ${d.error.message}` };
    return { seq, dlqSubject, source: '?', reason: `not a dead letter: ${d.error.message}`, receivedAt: 0, deliveries: 0, original: decodeOriginal(data), writer: deadLetterWriter(n, dlqSubject, replay), replay };
  }
  const v = d.value;
  const replay = replayPlan(n, seq, dlqSubject, v);
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
    writer: deadLetterWriter(n, dlqSubject, replay),
    replay,
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
