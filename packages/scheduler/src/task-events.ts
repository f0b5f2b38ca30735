/**
 * `task.events`: a task's stored events, read from the EVENTS stream by subject one message at a time
 * (message get with `next_by_subj`, NATS 2.9+), so clients read their history without a JetStream
 * consumer of their own (decision 0022).
 */
import type { StoredMsg } from '@nats-io/jetstream';
import type { Bus } from '@triad/bus';
import { ErrorCode, TaskEventBatchSchema, TriadError, decode, errorMessage, type TaskEvent } from '@triad/protocol';

/** At most this many bytes of stored batches per reply (a reply must stay under NATS' 1 MB). */
const REPLY_BUDGET_BYTES = 512 * 1024;
/** At most this many stored messages per reply. */
const MAX_MESSAGES = 1_000;

export interface TaskEventsPage {
  events: TaskEvent[];
  /** The stream sequence to read on from (later events, or the rest when `more`). */
  next: number;
  /** The page stopped at its size limit: more are stored already. */
  more: boolean;
}

/**
 * The events of task `taskId` stored under `subject` (one client's `event.<c>.<taskId>`, or
 * `event.*.<taskId>`) from stream sequence `from` on, sorted by `seq`, each once (a rejection, `seq` 0,
 * is kept each time). Messages that are not an event batch of this task are skipped.
 */
export async function readTaskEvents(bus: Bus, subject: string, taskId: string, from = 1): Promise<TaskEventsPage> {
  const stream = bus.names.streams.events;
  const bySeq = new Map<number, TaskEvent>();
  const rejections: TaskEvent[] = [];
  let bytes = 0;
  let next = from;
  for (let messages = 0; ; messages++) {
    if (messages >= MAX_MESSAGES || bytes >= REPLY_BUDGET_BYTES) return { events: sorted(bySeq, rejections), next, more: true };
    const m = await nextMessage(bus, stream, subject, next);
    if (!m) return { events: sorted(bySeq, rejections), next, more: false };
    next = m.seq + 1;
    bytes += m.data.length;
    const d = decode(m.data, TaskEventBatchSchema, 'task events');
    if (!d.ok || d.value.taskId !== taskId) continue;
    for (const ev of d.value.events) {
      if (ev.taskId !== taskId) continue;
      if (ev.seq === 0) rejections.push(ev);
      else bySeq.set(ev.seq, ev);
    }
  }
}

function sorted(bySeq: Map<number, TaskEvent>, rejections: TaskEvent[]): TaskEvent[] {
  return [...rejections, ...[...bySeq.values()].sort((a, b) => a.seq - b.seq)];
}

/** The first message on `subject` at or after `seq`, or undefined when there is none. */
async function nextMessage(bus: Bus, stream: string, subject: string, seq: number): Promise<StoredMsg | undefined> {
  try {
    // nats.js types only seq/last_by_subj for the API's message get; the server (2.9+) takes next_by_subj too.
    const m = await bus.jsm.streams.getMessage(stream, { seq, next_by_subj: subject } as unknown as { seq: number });
    return m ?? undefined;
  } catch (e) {
    const msg = errorMessage(e);
    if (/no message found/i.test(msg)) return undefined;
    if (/stream not found/i.test(msg)) return undefined;
    throw new TriadError(ErrorCode.Unavailable, `cannot read the events stream ${stream} (${msg}); try again`, { cause: e });
  }
}
