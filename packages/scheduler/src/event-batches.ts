/**
 * Task events out of a scheduler (decision 0025). Each transition's events are stored in the EVENTS
 * stream as one message on the task's own subject, as always (its history, read by subject). To a reply
 * subject that announced it reads batches (its last token starts with `b~`), the transitions of one
 * event-loop turn go as one `{ batches: [...] }` message — each element the very bytes the stream stores;
 * to any other reply subject, and for a transition alone in its turn, one message per transition.
 */
import { encodeTaskEvents, publishPlain, storeTaskEvents, type Bus } from '@triad/bus';
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_EVENT_BATCHES_PER_MESSAGE, encode, takesEventBatches, type TaskEvent } from '@triad/protocol';

/** Bytes a message keeps free for its envelope and each element's framing. */
const ENVELOPE_BYTES = 64;
const PER_ITEM_BYTES = 5;

export class EventSender {
  /** Encoded transitions waiting for the turn's end, by reply subject. */
  private readonly replies = new Map<string, Uint8Array[]>();
  private scheduled = false;
  /** Reply messages and the transitions they carried, for the bench and tests: their ratio is the batching. */
  readonly stats = { replyMessages: 0, replyTransitions: 0 };

  constructor(
    private readonly bus: Bus,
    /** Whether reply subjects that read batches get them (TRIAD_EVENT_BATCHES, default off: one message per transition). */
    private readonly batches: boolean = false,
  ) {}

  /** Stores one transition's events and sends them to the submitter's reply subject, if any; never waits. */
  send(client: string, taskId: string, events: readonly TaskEvent[], replyTo?: string): void {
    const bytes = encodeTaskEvents(taskId, events);
    if (!bytes) return;
    if (replyTo) {
      this.stats.replyTransitions++;
      if (this.batches && takesEventBatches(replyTo)) this.queue(replyTo, bytes);
      else this.reply(replyTo, bytes);
    }
    // Publishes on one connection keep their order: a transition's stored events follow its reply.
    storeTaskEvents(this.bus, client, taskId, events, bytes);
  }

  private reply(replyTo: string, bytes: Uint8Array): void {
    this.stats.replyMessages++;
    publishPlain(this.bus, replyTo, bytes);
  }

  private queue(replyTo: string, bytes: Uint8Array): void {
    let q = this.replies.get(replyTo);
    if (!q) this.replies.set(replyTo, (q = []));
    q.push(bytes);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    const replies = [...this.replies];
    this.replies.clear();
    for (const [replyTo, q] of replies) {
      for (const chunk of chunks(q)) {
        const [first] = chunk;
        if (chunk.length === 1 && first) this.reply(replyTo, first);
        else {
          this.stats.replyMessages++;
          publishPlain(this.bus, replyTo, encode({ batches: chunk }));
        }
      }
    }
  }
}

/** Splits a turn's transitions into messages of at most MAX_EVENT_BATCHES_PER_MESSAGE and the message limit. */
function chunks(q: Uint8Array[]): Uint8Array[][] {
  const out: Uint8Array[][] = [];
  let cur: Uint8Array[] = [];
  let size = ENVELOPE_BYTES;
  for (const b of q) {
    const n = b.length + PER_ITEM_BYTES;
    if (cur.length > 0 && (cur.length >= MAX_EVENT_BATCHES_PER_MESSAGE || size + n > DEFAULT_MAX_MESSAGE_BYTES)) {
      out.push(cur);
      cur = [];
      size = ENVELOPE_BYTES;
    }
    cur.push(b);
    size += n;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}
