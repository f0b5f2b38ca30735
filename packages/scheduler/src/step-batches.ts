/**
 * Step request batches (decision 0023). Requests a scheduler dispatches to one agent type in one
 * event-loop turn go out as one `StepRequestBatch` message on `step.b~<agent>` — when that type has
 * announced that it takes batches by pulling from its `batch-<agent>` durable. Otherwise, and for a
 * request alone in its turn, each goes out alone on `step.<agent>` with its message id, as always.
 */
import { publishDurable, type Bus } from '@triad/bus';
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_REQUESTS_PER_BATCH, encode, errorMessage } from '@triad/protocol';
import { silentLogger, traceHeaders, type Logger } from '@triad/telemetry';

/** How old the list of batch-taking agent types may be before a dispatch asks for it again. */
export const BATCH_TAKERS_MAX_AGE_MS = 2_000;
/** Bytes a batch keeps free for its envelope and each item's framing and traceparent. */
const ENVELOPE_BYTES = 1_024;
const PER_ITEM_BYTES = 72;

/**
 * Which agent types take batches now: those whose `batch-<agent>` durable has pull requests waiting or
 * batches in flight. Read from the STEPS stream's consumer list, at most every `maxAgeMs`, in the
 * background — `takes()` never waits; until the first read, and after a failed one, no type does.
 */
export class BatchTakers {
  private taking = new Set<string>();
  private readAt = -Infinity;
  private reading = false;

  constructor(
    private readonly bus: Bus,
    private readonly log: Logger = silentLogger,
    private readonly maxAgeMs = BATCH_TAKERS_MAX_AGE_MS,
  ) {}

  takes(agent: string): boolean {
    if (!this.reading && Date.now() - this.readAt >= this.maxAgeMs) this.refresh();
    return this.taking.has(agent);
  }

  /** Reads the list now (tests, and a scheduler that wants the first dispatch batched). */
  async read(): Promise<void> {
    const n = this.bus.names;
    const prefix = n.consumers.agentBatch('');
    const taking = new Set<string>();
    for await (const c of this.bus.jsm.consumers.list(n.streams.steps)) {
      if (c.name.startsWith(prefix) && (c.num_waiting > 0 || c.num_ack_pending > 0)) taking.add(c.name.slice(prefix.length));
    }
    this.taking = taking;
  }

  private refresh(): void {
    this.reading = true;
    this.readAt = Date.now();
    this.read()
      .catch((e: unknown) => {
        // Unknown: single requests reach every agent, so send those until the next read.
        this.taking = new Set();
        this.log.debug({ err: errorMessage(e) }, 'could not list the agents that take step request batches; sending single requests');
      })
      .finally(() => (this.reading = false));
  }
}

/** A step request waiting for its turn's end. */
interface Queued {
  bytes: Uint8Array;
  messageId: string;
  traceparent: string;
  resolve(): void;
  reject(e: unknown): void;
}

/** Sends step requests, in batches to agent types that take them. */
export class StepSender {
  private readonly queues = new Map<string, Queued[]>();
  private scheduled = false;
  /** Messages and requests sent, for the bench and tests: their ratio is the batching. */
  readonly stats = { messages: 0, requests: 0, batches: 0 };

  constructor(
    private readonly bus: Bus,
    /** Which agent types take batches (a BatchTakers); none: every request goes alone. */
    private readonly takers: Pick<BatchTakers, 'takes'> | undefined,
    /** The most requests per batch; 1 never batches. */
    private readonly max: number = MAX_REQUESTS_PER_BATCH,
  ) {}

  /** Resolves when JetStream has stored the request (alone or in its batch). */
  send(agent: string, bytes: Uint8Array, messageId: string): Promise<void> {
    if (this.max <= 1 || !this.takers?.takes(agent)) return this.single(agent, bytes, messageId);
    return new Promise<void>((resolve, reject) => {
      let q = this.queues.get(agent);
      if (!q) this.queues.set(agent, (q = []));
      // The dispatch's trace context, taken now: the batch is published in a later turn.
      q.push({ bytes, messageId, traceparent: traceHeaders()['traceparent'] ?? '', resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private single(agent: string, bytes: Uint8Array, messageId: string, traceparent?: string): Promise<void> {
    this.stats.messages++;
    this.stats.requests++;
    return publishDurable(this.bus, this.bus.names.subjects.step(agent), bytes, messageId, traceparent ? { traceparent } : undefined).then(() => undefined);
  }

  private flush(): void {
    this.scheduled = false;
    const queues = [...this.queues];
    this.queues.clear();
    for (const [agent, q] of queues) {
      for (const chunk of chunks(q, this.max)) {
        const [first] = chunk;
        if (chunk.length === 1 && first) {
          this.single(agent, first.bytes, first.messageId, first.traceparent).then(
            () => first.resolve(),
            (e: unknown) => first.reject(e),
          );
          continue;
        }
        this.stats.messages++;
        this.stats.batches++;
        this.stats.requests += chunk.length;
        const traced = chunk.some((c) => c.traceparent !== '');
        const bytes = encode({ requests: chunk.map((c) => c.bytes), ...(traced ? { traceparents: chunk.map((c) => c.traceparent) } : {}) });
        // No message id: there is none for "these attempts together" (decision 0023, Duplicates).
        publishDurable(this.bus, this.bus.names.subjects.stepBatch(agent), bytes).then(
          () => chunk.forEach((c) => c.resolve()),
          (e: unknown) => chunk.forEach((c) => c.reject(e)),
        );
      }
    }
  }
}

/** Splits a turn's requests into batches of at most `max` requests and the message limit. */
function chunks(q: Queued[], max: number): Queued[][] {
  const out: Queued[][] = [];
  let cur: Queued[] = [];
  let size = ENVELOPE_BYTES;
  for (const r of q) {
    const b = r.bytes.length + PER_ITEM_BYTES;
    if (cur.length > 0 && (cur.length >= max || size + b > DEFAULT_MAX_MESSAGE_BYTES)) {
      out.push(cur);
      cur = [];
      size = ENVELOPE_BYTES;
    }
    cur.push(r);
    size += b;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}
