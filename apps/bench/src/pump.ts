/**
 * The baseline's consumer loop: pulls from a durable JetStream consumer and runs a handler with bounded
 * concurrency — the same shape as Triad's own consumer loop (packages/bus/src/consumer.ts), so the
 * baseline pays for the same pull batching and in-flight limit, and for nothing Triad adds on top.
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { connectBus } from '@triad/bus';
import type { NatsConnectionOptions } from '@triad/settings';

/** The baseline's NATS connection: the very one Triad's actors open, so the baseline follows any change to their client settings. */
export async function baselineConnection(nats: NatsConnectionOptions, namespace: string, name: string): Promise<NatsConnection> {
  return (await connectBus({ ...nats, namespace, name, failFast: true })).nc;
}

export interface Pump {
  stop(): Promise<void>;
}

export async function pump(consumer: Consumer, concurrency: number, handler: (m: JsMsg) => Promise<void>, onError: (e: unknown) => void): Promise<Pump> {
  const messages = await consumer.consume({ max_messages: Math.max(concurrency * 2, 32), expires: 5_000 });
  const inFlight = new Set<Promise<void>>();
  let stopped = false;
  const loop = (async () => {
    for await (const m of messages) {
      const p: Promise<void> = handler(m)
        .catch(onError)
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
      if (stopped) break;
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await messages.close();
      await loop.catch(() => undefined);
      await Promise.allSettled([...inFlight]);
    },
  };
}

/** Stream and subject names of the baseline, per namespace (never shared with Triad's). */
export function baselineNames(namespace: string): { reqStream: string; repStream: string; reqSubject: string; repSubject: string } {
  return {
    reqStream: `BENCH_${namespace}_REQ`,
    repStream: `BENCH_${namespace}_REP`,
    reqSubject: `bench.${namespace}.req`,
    repSubject: `bench.${namespace}.rep`,
  };
}
