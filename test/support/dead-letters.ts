// Reads a test Triad's dead letters (the namespace's DLQ stream), and waits for one: the integration
// tests' one way to see what a consumer refused and why.
import { DeadLetterSchema, decode, type DeadLetter } from '@triad/protocol';
import type { Bus } from '@triad/bus';
import { waitFor } from '../harness/index.js';

/** Room for a dead letter of a message at the protocol's size limit, plus its envelope. */
const MAX_DEAD_LETTER_BYTES = 3_000_000;

/** Every dead letter of the bus's namespace so far, in order (one direct get each: no consumer left behind). */
export async function deadLetters(bus: Bus): Promise<DeadLetter[]> {
  const stream = bus.names.streams.deadLetters;
  const info = await bus.jsm.streams.info(stream).catch(() => undefined);
  const out: DeadLetter[] = [];
  for (let seq = info?.state.first_seq ?? 1; seq <= (info?.state.last_seq ?? 0); seq++) {
    const m = await bus.jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
    const d = m ? decode(m.data, DeadLetterSchema, 'dead letter', MAX_DEAD_LETTER_BYTES) : undefined;
    if (d?.ok) out.push(d.value);
  }
  return out;
}

/** Waits for the first dead letter `match` accepts; a timeout names `what` and the reasons seen. */
export async function waitForDeadLetter(bus: Bus, match: (d: DeadLetter) => boolean, what: string, timeoutMs = 15_000): Promise<DeadLetter> {
  let seen: DeadLetter[] = [];
  return waitFor(
    async () => {
      seen = await deadLetters(bus);
      return seen.find(match);
    },
    { timeoutMs, what, lastSeen: () => `${seen.length} dead letters: ${seen.map((d) => `[${d.source}] ${d.reason.slice(0, 120)}`).join(' | ')}` },
  );
}
