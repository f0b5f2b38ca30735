/**
 * A durable consumer loop: pulls from a JetStream consumer, runs a handler with bounded concurrency,
 * naks failures with back-off, dead-letters messages redelivered past a limit, and survives NATS
 * restarts by re-attaching to the consumer.
 */
import type { JsMsg } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/nats-core';
import { errorMessage } from '@triad/protocol';
import { silentLogger, type Logger } from '@triad/telemetry';
import { triadMetrics } from '@triad/telemetry';
import type { Bus } from './connection.js';
import { unsupportedVersion } from './headers.js';
import { deadLetter } from './publish.js';

export interface Delivery {
  readonly data: Uint8Array;
  readonly subject: string;
  /** The message's NATS headers, if it has any (`Triad-Protocol`, `Triad-Reply-To`, `Nats-Msg-Id`). */
  readonly headers: MsgHdrs | undefined;
  /** 1 on first delivery. */
  readonly deliveryCount: number;
  /** Tells the server the handler is still working (resets the ack wait). */
  readonly working: () => void;
  /**
   * Acknowledges now, or later: a handler that returned 'defer' acknowledges with it once its work is
   * safely handed on (an agent, once its step's result is stored; decision 0010).
   */
  readonly ackNow: () => void;
}

/**
 * What a handler decides; throwing means "retry later" (nak with back-off). 'defer': the handler keeps
 * the message (extending it with `working()`) and acknowledges it itself with `ackNow()`; if it never
 * does, the server redelivers the message after the ack wait.
 */
export type Disposition = 'ack' | 'defer' | { nakDelayMs: number } | { deadLetter: string };

export interface ConsumeOptions {
  stream: string;
  durable: string;
  /** Source name used in the dead-letter subject (e.g. "submit", "result", "step.payment"). */
  source: string;
  concurrency?: number;
  /** A message delivered more than this many times is dead-lettered with its bytes and the reason. */
  maxDeliveries?: number;
  /**
   * Messages pulled ahead of processing (default concurrency × 2, at least 32). Agents pull only what
   * they can start, so several processes share the work evenly and a dead one strands little.
   */
  prefetch?: number;
  logger?: Logger;
  /**
   * How often the consumer's info (pending, ack pending, redelivered) is read for the
   * triad_nats_consumer_* gauges (default 5 s; 0 turns it off). Decision 0013.
   */
  infoIntervalMs?: number;
}

/** Reads the consumer's info into the triad_nats_consumer_* gauges every `everyMs` until stopped. */
function pollConsumerInfo(bus: Bus, o: ConsumeOptions, everyMs: number): () => void {
  if (everyMs <= 0) return () => undefined;
  const m = triadMetrics();
  const labels = { namespace: bus.names.namespace, stream: o.stream, consumer: o.durable };
  let busy = false;
  const timer = setInterval(() => {
    if (busy || !bus.isConnected()) return;
    busy = true;
    bus.jsm.consumers
      .info(o.stream, o.durable)
      .then((ci) => {
        m.consumerPending.set(labels, ci.num_pending);
        m.consumerAckPending.set(labels, ci.num_ack_pending);
        m.consumerRedelivered.set(labels, ci.num_redelivered);
      })
      .catch(() => undefined) // the next poll tries again; the gauges keep their last value
      .finally(() => (busy = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

export interface RunningConsumer {
  stop(): Promise<void>;
  /** Resolves once the loop has attached to the consumer the first time. */
  readonly ready: Promise<void>;
}

export function startConsumer(bus: Bus, o: ConsumeOptions, handler: (d: Delivery) => Promise<Disposition>): RunningConsumer {
  const log = o.logger ?? silentLogger;
  const concurrency = o.concurrency ?? 64;
  const maxDeliveries = o.maxDeliveries ?? 20;
  let stopped = false;
  let current: { stop(): void } | undefined;
  const inFlight = new Set<Promise<void>>();
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((r) => (markReady = r));

  const handle = async (m: JsMsg): Promise<void> => {
    const deliveryCount = m.info.deliveryCount;
    if (deliveryCount > maxDeliveries) {
      const stored = await deadLetter(bus, o.source, `redelivered ${deliveryCount - 1} times without success (limit ${maxDeliveries})`, m.data, deliveryCount, { subject: m.subject, headers: m.headers });
      if (!stored) log.error({ subject: m.subject, deliveryCount }, 'dead letter not stored past the redelivery limit: message dropped');
      m.term();
      return;
    }
    // A message of another major protocol version is not guessed at: dead-lettered with the reason.
    const foreign = unsupportedVersion(m.headers);
    if (foreign) {
      await deadLetter(bus, o.source, foreign, m.data, deliveryCount, { subject: m.subject, headers: m.headers });
      m.term();
      return;
    }
    let d: Disposition;
    let acked = false;
    const ackNow = (): void => {
      if (!acked) m.ack();
      acked = true;
    };
    try {
      d = await handler({ data: m.data, subject: m.subject, headers: m.headers, deliveryCount, working: () => m.working(), ackNow });
    } catch (e) {
      if (acked) {
        log.error({ err: errorMessage(e), subject: m.subject }, 'handler failed after acknowledging; the message is not redelivered');
        return;
      }
      const delay = Math.min(5_000, 100 * 2 ** Math.min(deliveryCount, 6));
      log.warn({ err: errorMessage(e), subject: m.subject, deliveryCount, delay }, 'handler failed; message will be redelivered');
      m.nak(delay);
      return;
    }
    if (acked || d === 'defer') return;
    if (d === 'ack') m.ack();
    else if ('nakDelayMs' in d) m.nak(d.nakDelayMs);
    else if (await deadLetter(bus, o.source, d.deadLetter, m.data, deliveryCount, { subject: m.subject, headers: m.headers })) {
      // term() without a reason: nats-server 2.9 silently ignores a term carrying one.
      m.term();
    } else {
      // The dead letter was not stored (NATS busy or away): put the message back, to be dead-lettered
      // on a later delivery rather than lost. A dead letter whose ack alone was lost is stored twice.
      m.nak(Math.min(5_000, 100 * 2 ** Math.min(deliveryCount, 6)));
    }
  };

  const loop = async (): Promise<void> => {
    let backoff = 100;
    while (!stopped) {
      try {
        const consumer = await bus.js.consumers.get(o.stream, o.durable);
        // Pull requests expire after 2 s: a consumer notices a restarted server (missed heartbeats)
        // within seconds, and a paused process's outstanding pulls hold messages only that long.
        const messages = await consumer.consume({ max_messages: o.prefetch ?? Math.max(concurrency * 2, 32), expires: 2_000 });
        current = messages;
        markReady();
        backoff = 100;
        for await (const m of messages) {
          const p = handle(m)
            .catch((e: unknown) => log.error({ err: errorMessage(e), subject: m.subject }, 'message handling crashed'))
            .finally(() => inFlight.delete(p));
          inFlight.add(p);
          if (inFlight.size >= concurrency) await Promise.race(inFlight);
          if (stopped) break;
        }
      } catch (e) {
        if (stopped) break;
        log.warn({ err: errorMessage(e), stream: o.stream, durable: o.durable, retryInMs: backoff }, 'consumer detached; re-attaching');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  };
  const done = loop();
  const stopPolling = pollConsumerInfo(bus, o, o.infoIntervalMs ?? 5_000);

  return {
    ready,
    stop: async () => {
      stopped = true;
      stopPolling();
      current?.stop();
      await done;
      await Promise.allSettled([...inFlight]);
    },
  };
}
