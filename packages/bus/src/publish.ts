/** Publishing: JetStream with a message id where duplicates are possible; dead letters; plain NATS for replies. */
import { encode, errorMessage, type DeadLetter, type TaskEvent, type TaskEventBatch } from '@triad/protocol';
import { deadLetterReasonClass, triadMetrics } from '@triad/telemetry';
import type { Bus } from './connection.js';
import { protocolHeaders } from './headers.js';

/** A JetStream publish of a protocol message (with its version header), optionally de-duplicated by `msgID`. */
export async function publishDurable(bus: Bus, subject: string, data: Uint8Array, msgID?: string, extraHeaders?: Record<string, string>): Promise<{ duplicate: boolean }> {
  const ack = await bus.js.publish(subject, data, { headers: protocolHeaders(extraHeaders), ...(msgID ? { msgID } : {}) });
  return { duplicate: ack.duplicate };
}

/** A plain NATS publish of a protocol message (with its version header). */
export function publishPlain(bus: Bus, subject: string, data: Uint8Array): void {
  bus.nc.publish(subject, data, { headers: protocolHeaders() });
}
/** The longest reason a dead letter keeps (a message with thousands of bad fields lists them all). */
export const DEAD_LETTER_REASON_CHARS = 4_000;

/** Publishes a dead letter with the reason and the original bytes; never throws (it is the last resort). */
export async function deadLetter(bus: Bus, source: string, reason: string, original: Uint8Array, deliveries: number): Promise<boolean> {
  const kept = reason.length > DEAD_LETTER_REASON_CHARS ? `${reason.slice(0, DEAD_LETTER_REASON_CHARS)}… (${reason.length} characters)` : reason;
  const dl: DeadLetter = { source, reason: kept, receivedAt: Date.now(), deliveries, original: new Uint8Array(original) };
  try {
    await bus.js.publish(bus.names.subjects.deadLetter(source.replace(/[.*>\s]/g, '_')), encode(dl, 2_000_000), { headers: protocolHeaders() });
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
  if (!bytes) return;
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
  if (events.length === 0) return undefined;
  const batch: TaskEventBatch = { taskId, events: [...events] };
  const bytes = encode(batch);
  if (replyTo) publishPlain(bus, replyTo, bytes);
  return bytes;
}
