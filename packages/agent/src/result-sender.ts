/**
 * Sends one agent type's step results to the scheduler with as few JetStream publishes as the load
 * allows (decision 0008), on that agent type's result subject (decision 0010). A result goes out at once
 * when no publish is in flight; results that finish while one is in flight wait for it and then go out
 * together, as one batch message. So an idle agent adds no delay, and a busy one pays one
 * publish-with-ack per batch instead of one per step.
 */
import { publishDurable, type Bus } from '@triad/bus';
import { ROOT_CONTEXT, context } from '@triad/telemetry';
import { DEFAULT_MAX_MESSAGE_BYTES, MAX_RESULTS_PER_BATCH, encode, type StepResultBatch } from '@triad/protocol';

interface Pending {
  bytes: Uint8Array;
  msgID: string;
  /** The step attempt's trace headers: sent with a result that goes out alone, in the body's `traceparents` in a batch. */
  trace: Record<string, string>;
  resolve(): void;
  reject(e: unknown): void;
}

/** Room for the batch envelope around the results (msgpack headers: a few bytes per result). */
const ENVELOPE_BYTES = 64 + 8 * MAX_RESULTS_PER_BATCH;

export class ResultSender {
  private queue: Pending[] = [];
  private flushing: Promise<void> | undefined;
  /** Publishes made and results sent, for the agent's metrics. */
  readonly stats = { publishes: 0, results: 0 };

  constructor(
    private readonly bus: Bus,
    /** The agent type's result subject (`triad.<ns>.result.<agent>`). */
    private readonly subject: string,
    private readonly maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
  ) {}

  /** Results accepted but not yet stored by JetStream. */
  get backlog(): number {
    return this.queue.length;
  }

  /**
   * Queues one encoded StepResult; resolves once JetStream has stored it, rejects if that publish
   * failed (the result is then lost, and the supervisor retries the step after its complete-by).
   */
  send(bytes: Uint8Array, msgID: string, trace: Record<string, string> = {}): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ bytes, msgID, trace, resolve, reject });
      this.kick();
    });
  }

  /** Starts a flush unless one runs; a result queued as a flush ends is picked up by the next. */
  private kick(): void {
    if (this.flushing) return;
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  /** Resolves when everything queued so far has been published (or has failed). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    // One macrotask turn first: results finishing in the same turn share the first publish too.
    await new Promise((r) => setImmediate(r));
    while (this.queue.length > 0) {
      const batch = this.take();
      try {
        const subject = this.subject;
        if (batch.length === 1) {
          const only = batch[0]!;
          await publishDurable(this.bus, subject, only.bytes, only.msgID, only.trace);
        } else {
          const envelope: StepResultBatch = { results: batch.map((p) => p.bytes) };
          // Each result's own trace context rides in the body: a batch has one set of headers (decision 0013).
          if (batch.some((p) => p.trace['traceparent'])) envelope.traceparents = batch.map((p) => p.trace['traceparent'] ?? '');
          // Outside any span: the flush runs in the context of whichever step started it, not these.
          await context.with(ROOT_CONTEXT, () => publishDurable(this.bus, subject, encode(envelope, this.maxBytes)));
        }
        this.stats.publishes++;
        this.stats.results += batch.length;
        for (const p of batch) p.resolve();
      } catch (e) {
        for (const p of batch) p.reject(e);
      }
    }
  }

  /** The next batch: in order, up to the count limit and the message size limit (always at least one). */
  private take(): Pending[] {
    let bytes = ENVELOPE_BYTES;
    let n = 0;
    while (n < this.queue.length && n < MAX_RESULTS_PER_BATCH) {
      const size = this.queue[n]!.bytes.length;
      if (n > 0 && bytes + size > this.maxBytes) break;
      bytes += size;
      n++;
    }
    return this.queue.splice(0, Math.max(1, n));
  }
}
