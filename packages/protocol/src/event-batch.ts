/**
 * Task events on a reply subject come one transition per message or — to a reply subject that announced
 * it reads them (decision 0025: its last token starts with `b~`) — the transitions of one event-loop turn
 * of a scheduler in one message: `{ batches: [<encoded TaskEventBatch>, …] }`. Each transition's events
 * stay separately encoded (the bytes the EVENTS stream stores for it), so a reader validates each on its
 * own and a bad one never costs its neighbours — the shape of the result and request batches.
 */
import { z } from 'zod';
import { DEFAULT_MAX_MESSAGE_BYTES, unpackUntrusted, validate, type Decoded } from './codec.js';
import { ErrorCode, TriadError } from './errors.js';
import { TaskEventBatchSchema, type TaskEventBatch } from './messages.js';

/** The most transitions' events one message to a reply subject carries. */
export const MAX_EVENT_BATCHES_PER_MESSAGE = 256;

/** The start of a reply subject's last token that announces it reads event batches (decision 0025). */
export const EVENT_BATCH_REPLY_MARK = 'b~';

export const TaskEventBatchesSchema = z.object({
  batches: z
    .array(z.custom<Uint8Array>((v) => v instanceof Uint8Array, "each element of batches must be binary: one transition's encoded task events"))
    .min(1)
    .max(MAX_EVENT_BATCHES_PER_MESSAGE),
});
export type TaskEventBatches = z.output<typeof TaskEventBatchesSchema>;

/** Whether a reply subject announced that it reads event batches: its last token starts with `b~`. */
export function takesEventBatches(replyTo: string): boolean {
  const dot = replyTo.lastIndexOf('.');
  return replyTo.startsWith(EVENT_BATCH_REPLY_MARK, dot + 1);
}

/**
 * Decodes a message on a reply subject: one transition's events (`{ taskId, events }`) or several
 * (`{ batches }`). `items` holds each transition's events, or the reason they cannot be read; the
 * message fails as a whole only when it is neither shape.
 */
export function decodeTaskEventMessage(bytes: Uint8Array, maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES): Decoded<Decoded<TaskEventBatch>[]> {
  if (bytes.length > maxBytes) {
    return { ok: false, error: new TriadError(ErrorCode.PayloadTooLarge, `task events message is ${bytes.length} bytes, over the limit of ${maxBytes}`) };
  }
  const unpacked = unpackUntrusted(bytes, 'task events');
  if (!unpacked.ok) return unpacked;
  const raw = unpacked.value;
  if (raw !== null && typeof raw === 'object' && 'batches' in raw) {
    const batch = validate(raw, TaskEventBatchesSchema, 'task event batches');
    if (!batch.ok) return batch;
    return {
      ok: true,
      value: batch.value.batches.map((b, i) => {
        const what = `task events ${i + 1} of ${batch.value.batches.length} in a message`;
        const one = unpackUntrusted(b, what);
        return one.ok ? validate(one.value, TaskEventBatchSchema, what) : one;
      }),
    };
  }
  const one = validate(raw, TaskEventBatchSchema, 'task events');
  return one.ok ? { ok: true, value: [one] } : one;
}
