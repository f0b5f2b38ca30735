/** Opens the NATS connection an actor or client uses: reconnects forever, names itself for monitoring. */
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/nats-core';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { ErrorCode, TriadError, names, type Names } from '@triad/protocol';

export interface BusOptions {
  url: string;
  namespace: string;
  /** Shown in the server's connection list (e.g. "scheduler-3f2a"). */
  name: string;
  /**
   * Services wait for NATS to come up (the default); a client that must not hang a shell sets this to
   * give up when the first connection fails.
   */
  failFast?: boolean;
  connectTimeoutMs?: number;
  /**
   * Where this connection's reply subjects live (request replies, JetStream acks): a client's own inbox
   * prefix, `_INBOX.<ns>.<client>`, which its permissions let it subscribe to (decision 0010).
   */
  inboxPrefix?: string;
}

export interface Bus {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly names: Names;
  close(): Promise<void>;
}

export async function connectBus(opts: BusOptions): Promise<Bus> {
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: opts.url,
      name: opts.name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      // Services keep trying the first connection too, so an actor started before NATS waits for it.
      waitOnFirstConnect: !opts.failFast,
      timeout: opts.connectTimeoutMs ?? 20_000,
      pingInterval: 10_000,
      // nats.js otherwise builds two Error objects per request (every JetStream publish) for async stack
      // traces: a quarter of the scheduler's CPU in the benchmark's profile. Our errors carry context.
      noAsyncTraces: true,
      ...(opts.inboxPrefix ? { inboxPrefix: opts.inboxPrefix } : {}),
    });
  } catch (e) {
    throw new TriadError(
      ErrorCode.Unavailable,
      `cannot connect to NATS at ${opts.url}: ${(e as Error).message}; start nats-server with JetStream (nats-server -js) or set NATS_URL`,
      { cause: e },
    );
  }
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  // A publish whose ack never comes (the server died under it) fails after this and the message that
  // caused it is redelivered: short, so a NATS restart costs seconds, not tens of seconds.
  const js = jetstream(nc, { timeout: 4_000 });
  return {
    nc,
    js,
    jsm,
    names: names(opts.namespace),
    close: async () => {
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}
