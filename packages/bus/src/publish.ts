/** Publishing: JetStream with a message id where duplicates are possible; dead letters; plain NATS for replies. */
import { headers } from '@nats-io/nats-core';
import { encode, errorMessage, type DeadLetter, type TaskEvent, type TaskEventBatch } from '@triad/protocol';
import type { Bus } from './connection.js';

export async function publishDurable(bus: Bus, subject: string, data: Uint8Array, msgID?: string): Promise<{ duplicate: boolean }> {
  const ack = await bus.js.publish(subject, data, msgID ? { msgID } : undefined);
  return { duplicate: ack.duplicate };
}

/** Publishes a dead letter with the reason and the original bytes; never throws (it is the last resort). */
export async function deadLetter(bus: Bus, source: string, reason: string, original: Uint8Array, deliveries: number): Promise<boolean> {
  const dl: DeadLetter = { source, reason, receivedAt: Date.now(), deliveries, original: new Uint8Array(original) };
  try {
    await bus.js.publish(bus.names.subjects.deadLetter(source.replace(/[.*>\s]/g, '_')), encode(dl, 2_000_000));
    return true;
  } catch (e) {
    // Nothing left to do but say so: the message will be terminated by the caller anyway.
    process.emitWarning(`dead letter for ${source} could not be published: ${errorMessage(e)}`);
    return false;
  }
}

/**
 * Publishes the events of one transition as one message: to the events stream (message id
 * `taskId:ev:<first seq>`, so a repeat is dropped) and, when the submitter named one, to its private
 * reply subject.
 */
export async function publishTaskEvents(bus: Bus, taskId: string, events: readonly TaskEvent[], replyTo?: string): Promise<void> {
  const first = events[0];
  if (!first) return;
  const batch: TaskEventBatch = { taskId, events: [...events] };
  const bytes = encode(batch);
  if (replyTo) {
    const h = headers();
    h.set('Triad-Task-Id', taskId);
    bus.nc.publish(replyTo, bytes, { headers: h });
  }
  await publishDurable(bus, bus.names.subjects.event(taskId), bytes, `${taskId}:ev:${first.seq}`);
}
