/** Publishing: JetStream with a message id where duplicates are possible; dead letters; plain NATS for replies. */
import type { JetStreamPublishOptions, PubAck } from '@nats-io/jetstream';
import { encode, errorMessage, type DeadLetter, type TaskEvent, type TaskEventBatch } from '@triad/protocol';
import { deadLetterReasonClass, triadMetrics } from '@triad/telemetry';
import type { MsgHdrs } from '@nats-io/nats-core';
import type { Bus } from './connection.js';
import { protocolHeaders } from './headers.js';

/**
 * How long a JetStream publish keeps trying through a stream's leader change on a NATS cluster (a 503 /
 * no responders while the stream has no leader, or a timeout while one is elected): the replicas elect a
 * new leader within a few seconds (decision 0015).
 */
export const PUBLISH_RETRY_MS = 10_000;
/** One try's timeout (the JetStream client's own default). */
const PUBLISH_TRY_MS = 4_000;

/** An error a stream's leader change gives a publish: nobody answered yet, or not in time. */
export function isLeaderChange(e: unknown): boolean {
  // nats.js reports a 503 to a JetStream request as "jetstream is not enabled" (caused by "no responders").
  for (let c: unknown = e, depth = 0; c !== undefined && c !== null && depth < 5; c = (c as { cause?: unknown }).cause, depth++) {
    const name = c instanceof Error ? c.name : '';
    if (name === 'NoRespondersError' || name === 'TimeoutError' || name === 'JetStreamNotEnabled') return true;
    if (/\b503\b|no responders|jetstream is not enabled|timeout|temporarily unavailable/i.test(errorMessage(c))) return true;
  }
  return false;
}

/** Whether the server this connection talks to is part of a NATS cluster (its INFO names one). */
function clustered(bus: Bus): boolean {
  return Boolean(bus.nc.info?.cluster);
}

/**
 * `js.publish`, tried again through a stream leader change until PUBLISH_RETRY_MS have passed (then the
 * last error), when connected to a NATS cluster. A retry is safe where duplicates matter: those publishes carry a message id, which
 * JetStream de-duplicates.
 */
export async function publishRetrying(bus: Bus, subject: string, data: Uint8Array, opts: Partial<JetStreamPublishOptions> = {}): Promise<PubAck> {
  const deadline = Date.now() + PUBLISH_RETRY_MS;
  for (let tries = 1; ; tries++) {
    try {
      return await bus.js.publish(subject, data, { ...opts, timeout: Math.max(250, Math.min(PUBLISH_TRY_MS, deadline - Date.now())) });
    } catch (e) {
      const wait = Math.min(50 * 2 ** tries, 1_000);
      // Only a clustered server has stream leaders to change; on one server a 503 means no such stream.
      if (!clustered(bus) || !isLeaderChange(e) || Date.now() + wait >= deadline) throw e;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** A JetStream publish of a protocol message (with its version header), optionally de-duplicated by `msgID`. */
export async function publishDurable(bus: Bus, subject: string, data: Uint8Array, msgID?: string, extraHeaders?: Record<string, string>): Promise<{ duplicate: boolean }> {
  const ack = await publishRetrying(bus, subject, data, { headers: protocolHeaders(extraHeaders), ...(msgID ? { msgID } : {}) });
  return { duplicate: ack.duplicate };
}

/** A plain NATS publish of a protocol message (with its version header). */
export function publishPlain(bus: Bus, subject: string, data: Uint8Array): void {
  bus.nc.publish(subject, data, { headers: protocolHeaders() });
}
/** The longest reason a dead letter keeps (a message with thousands of bad fields lists them all). */
export const DEAD_LETTER_REASON_CHARS = 4_000;

/** Where a dead-lettered message came from: its subject and headers, so an operator can replay it. */
export interface DeadLetterOrigin {
  subject: string;
  headers?: MsgHdrs | undefined;
}

/**
 * Publishes a dead letter with the reason, the original bytes and (when known) the original's subject
 * and headers; never throws (it is the last resort).
 */
export async function deadLetter(bus: Bus, source: string, reason: string, original: Uint8Array, deliveries: number, origin?: DeadLetterOrigin): Promise<boolean> {
  const kept = reason.length > DEAD_LETTER_REASON_CHARS ? `${reason.slice(0, DEAD_LETTER_REASON_CHARS)}… (${reason.length} characters)` : reason;
  const dl: DeadLetter = {
    source,
    reason: kept,
    receivedAt: Date.now(),
    deliveries,
    original: new Uint8Array(original),
    ...(origin ? { subject: origin.subject } : {}),
    ...(origin?.headers ? { headers: headerRecord(origin.headers) } : {}),
  };
  try {
    await publishRetrying(bus, bus.names.subjects.deadLetter(source.replace(/[.*>\s]/g, '_')), encode(dl, 2_000_000), { headers: protocolHeaders() });
    triadMetrics().deadLetters.inc({ namespace: bus.names.namespace, source, reason: deadLetterReasonClass(reason) });
    return true;
  } catch (e) {
    // The caller puts the message back for a later delivery (and drops it only past the redelivery limit).
    process.emitWarning(`dead letter for ${source} could not be published: ${errorMessage(e)}`);
    return false;
  }
}

/**
 * Publishes the events of one transition as one message: to the events stream under the submitting
 * client (message id `<client>:<taskId>:ev:<first seq>`, so a repeat is dropped) and, when the submitter
 * named one, to its private reply subject. Resolves when JetStream has stored them.
 */
export async function publishTaskEvents(bus: Bus, client: string, taskId: string, events: readonly TaskEvent[], replyTo?: string): Promise<void> {
  const bytes = eventBatch(bus, taskId, events, replyTo);
  if (bytes) await publishDurable(bus, bus.names.subjects.event(client, taskId), bytes, eventMessageId(client, taskId, events));
}

/**
 * The same, without waiting for (or asking for) JetStream's acknowledgement: a plain NATS publish to
 * the events stream's subject, which JetStream stores with the same message-id de-duplication. For the
 * scheduler's hot path, where events are history and not state (decision 0001): one fewer request,
 * reply and timer per transition. Events published while NATS is unreachable are lost from the history
 * once the client's reconnect buffer is full; the task state is unaffected.
 */
export function sendTaskEvents(bus: Bus, client: string, taskId: string, events: readonly TaskEvent[], replyTo?: string): void {
  const bytes = eventBatch(bus, taskId, events, replyTo);
  if (bytes) storeTaskEvents(bus, client, taskId, events, bytes);
}

/** One transition's events as they travel (a `TaskEventBatch`), or undefined when there are none. */
export function encodeTaskEvents(taskId: string, events: readonly TaskEvent[]): Uint8Array | undefined {
  if (events.length === 0) return undefined;
  const batch: TaskEventBatch = { taskId, events: [...events] };
  return encode(batch);
}

/**
 * Stores one transition's encoded events (`bytes`, from encodeTaskEvents) in the EVENTS stream under the
 * submitting client, with a plain NATS publish and the message id that drops a repeat (see sendTaskEvents).
 */
export function storeTaskEvents(bus: Bus, client: string, taskId: string, events: readonly TaskEvent[], bytes: Uint8Array): void {
  bus.nc.publish(bus.names.subjects.event(client, taskId), bytes, { headers: protocolHeaders({ 'Nats-Msg-Id': eventMessageId(client, taskId, events) }) });
}

/**
 * `<client>:<taskId>:ev:<first seq>`: a repeat of one transition's events is dropped; a rejection (seq 0)
 * of one client's submission never drops another client's for the same task id.
 */
function eventMessageId(client: string, taskId: string, events: readonly TaskEvent[]): string {
  return `${client}:${taskId}:ev:${events[0]?.seq ?? 0}`;
}

/** Encodes one transition's events and sends them to the submitter's reply subject, if any. */
function eventBatch(bus: Bus, taskId: string, events: readonly TaskEvent[], replyTo?: string): Uint8Array | undefined {
  const bytes = encodeTaskEvents(taskId, events);
  if (bytes && replyTo) publishPlain(bus, replyTo, bytes);
  return bytes;
}

/** The first value of each header (what a replay sends again). */
function headerRecord(h: MsgHdrs): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of h.keys()) out[k] = h.get(k);
  return out;
}

/** JetStream API error 10077: the subject holds its maximum of messages (a client's full submission backlog, decision 0022). */
const MAX_MSGS_PER_SUBJECT = 10077;

/** Whether a publish was refused because the client's submission backlog is full (decision 0022). */
export function isBacklogFull(e: unknown): boolean {
  for (let c: unknown = e, depth = 0; c instanceof Error && depth < 5; c = c.cause, depth++) {
    const api = c as { code?: unknown; api_error?: { err_code?: unknown } };
    if (api.code === MAX_MSGS_PER_SUBJECT || api.api_error?.err_code === MAX_MSGS_PER_SUBJECT || /maximum messages per subject exceeded/i.test(c.message)) return true;
  }
  return false;
}
