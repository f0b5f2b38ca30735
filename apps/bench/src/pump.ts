/**
 * The baseline's consumer loop: pulls from a durable JetStream consumer and runs a handler with bounded
 * concurrency — the same shape as Triad's own consumer loop (packages/bus/src/consumer.ts), so the
 * baseline pays for the same pull batching and in-flight limit, and for nothing Triad adds on top.
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { connectBus, loadNatsCredentials } from '@triad/bus';
import { parseNatsSettings, type NatsConnectionOptions } from '@triad/protocol';

/**
 * The baseline's NATS connection: the very one Triad's actors open (connectBus, so the baseline follows
 * any change to their client settings), or a plain one with `noAsyncTraces` for comparison.
 */
export async function baselineConnection(nats: NatsConnectionOptions, namespace: string, name: string, noAsyncTraces: boolean): Promise<NatsConnection> {
  if (noAsyncTraces) {
    // The same servers, credentials and TLS as connectBus, with nats.js' defaults otherwise.
    const settings = parseNatsSettings(nats);
    const { authenticator, tls } = await loadNatsCredentials(settings);
    return connect({ servers: settings.servers, name, noAsyncTraces: true, ...(authenticator ? { authenticator } : {}), ...(tls ? { tls } : {}) });
  }
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
