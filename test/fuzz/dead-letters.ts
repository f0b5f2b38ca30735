/** Reads a namespace's whole dead-letter stream. */
import type { Bus } from '@triad/bus';
import { DeadLetterSchema, decode, type DeadLetter } from '@triad/protocol';

export interface DeadLetters {
  entries: DeadLetter[];
  /** Messages on the dead-letter stream that are not DeadLetterSchema records (each one a finding). */
  malformed: string[];
}

/** A dead letter carries a message of up to the stream's limit plus its reason. */
const MAX_DEAD_LETTER_BYTES = 4_000_000;

export async function readDeadLetters(bus: Bus): Promise<DeadLetters> {
  const stream = bus.names.streams.deadLetters;
  const total = (await bus.jsm.streams.info(stream)).state.messages;
  const out: DeadLetters = { entries: [], malformed: [] };
  if (total === 0) return out;
  const consumer = await bus.js.consumers.get(stream);
  const messages = await consumer.consume({ max_messages: 64 });
  for await (const m of messages) {
    const d = decode(m.data, DeadLetterSchema, 'dead letter', MAX_DEAD_LETTER_BYTES);
    if (d.ok) out.entries.push(d.value);
    else out.malformed.push(`${m.subject} #${m.seq}: ${d.error.message}`);
    if (out.entries.length + out.malformed.length >= total || m.info.pending === 0) break;
  }
  await messages.close();
  return out;
}
