/**
 * Opens the NATS connection an actor or client uses: the servers, credentials and TLS of the NATS
 * settings, reconnecting forever once connected, named for monitoring. Settings that can never work
 * (refused credentials, failing TLS) end the first connection at once with a message naming them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '@nats-io/transport-node';
import type { ConnectionOptions, NatsConnection } from '@nats-io/nats-core';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { ErrorCode, TriadError, errorMessage, names, type Names } from '@triad/protocol';
import { parseNatsSettings, type NatsConnectionOptions, type NatsSettings } from '@triad/settings';
import { loadNatsCredentials, type NatsCredentials } from './credentials.js';
import { explainNatsRefusal, explainPermissionViolation, isConnectionRefused } from './refusals.js';
import { probeTls } from './tls-probe.js';

/** The NATS settings (NATS_URL, credentials, TLS: see NatsConnectionOptions) and how this connection behaves. */
export interface BusOptions extends NatsConnectionOptions {
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
  /**
   * The connection closed for good after it was up — not by close(): nats.js gives up after the server
   * refused the credentials twice on reconnect (revoked, expired). Services end themselves with it.
   */
  onFatal?: (e: TriadError) => void;
}

export interface Bus {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly names: Names;
  /** Connected to a server now (false while nats.js reconnects, and once closed): what /readyz reports. */
  isConnected(): boolean;
  close(): Promise<void>;
}

/** Pause between first-connection attempts while NATS is not up (the reconnect wait once connected, too). */
const RETRY_WAIT_MS = 250;

export async function connectBus(opts: BusOptions): Promise<Bus> {
  const settings = parseNatsSettings(opts);
  const credentials = await loadNatsCredentials(settings);
  const nc = await firstConnection(settings, credentials, opts);
  const { onFatal } = opts;
  if (onFatal) {
    void nc.closed().then((e) => {
      if (e instanceof Error) {
        onFatal(
          explainNatsRefusal(e, settings, credentials) ??
            new TriadError(ErrorCode.Unavailable, `the NATS connection to ${settings.servers.join(', ')} closed: ${errorMessage(e)}`, { cause: e }),
        );
      }
    });
  }
  let connected = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') connected = false;
      else if (s.type === 'reconnect') connected = true;
    }
  })().catch(() => undefined);
  // The first request: credentials of another namespace or role are refused here (its inbox, $JS.API.INFO).
  const jsm = await jetstreamManager(nc, { timeout: 10_000 }).catch(async (e: unknown) => {
    // A client identity's own account has no JetStream (decision 0022): it publishes its submissions
    // into the namespace's account through an import and needs no JetStream API of its own.
    if (isJetStreamNotEnabled(e)) return jetstreamManager(nc, { timeout: 10_000, checkAPI: false });
    const refused = explainPermissionViolation(e, opts.namespace) ?? explainJetStreamSilence(e, settings);
    await nc.close().catch(() => undefined);
    throw refused;
  });
  // A publish whose ack never comes (the server died under it) fails after this and the message that
  // caused it is redelivered: short, so a NATS restart costs seconds, not tens of seconds.
  const js = jetstream(nc, { timeout: 4_000 });
  return {
    nc,
    js,
    jsm,
    names: names(opts.namespace),
    isConnected: () => connected && !nc.isClosed(),
    close: async () => {
      if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * A JetStream API that does not answer at connect (nats.js says only "timeout"): what it may mean and
 * what to check. Kept `Unavailable` and worded "timed out", so callers that retry what may heal (the
 * CLI against a cluster electing leaders) still do.
 */
function explainJetStreamSilence(e: unknown, s: NatsSettings): unknown {
  if (!/timeout|timed out/i.test(errorMessage(e))) return e;
  return new TriadError(
    ErrorCode.Unavailable,
    `the JetStream API of NATS at ${s.servers.join(', ')} timed out at connect (no answer within 10 s): check that nats-server runs with JetStream enabled (-js, or jetstream {} in its config), and for a cluster that a majority of its nodes is up; then start again`,
    { cause: e },
  );
}

/**
 * The first connection. nats.js' own wait for it (waitOnFirstConnect) retries a failing TLS handshake
 * forever and hides a refused client certificate behind timeouts; here only what may heal (nothing
 * listening yet, a timeout that is not a refusal) is retried, and only by services.
 */
async function firstConnection(s: NatsSettings, credentials: NatsCredentials, opts: BusOptions): Promise<NatsConnection> {
  const options: ConnectionOptions = {
    servers: s.servers,
    name: opts.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: RETRY_WAIT_MS,
    waitOnFirstConnect: false,
    timeout: opts.connectTimeoutMs ?? 20_000,
    pingInterval: 10_000,
    // nats.js otherwise builds two Error objects per request (every JetStream publish) for async stack
    // traces: a quarter of the scheduler's CPU in the benchmark's profile. Our errors carry context.
    noAsyncTraces: true,
    ...(credentials.authenticator ? { authenticator: credentials.authenticator } : {}),
    ...(credentials.tls ? { tls: credentials.tls } : {}),
    ...(opts.inboxPrefix ? { inboxPrefix: opts.inboxPrefix } : {}),
  };
  for (;;) {
    try {
      return await connect(options);
    } catch (e) {
      let refusal = explainNatsRefusal(e, s, credentials);
      // A refused client certificate shows up as a timeout: look at the handshake before retrying.
      if (refusal === undefined && !isConnectionRefused(e)) {
        for (const server of s.servers) {
          const probed = await probeTls(server, credentials.tls);
          refusal = probed === undefined ? undefined : explainNatsRefusal(probed, s, credentials);
          if (refusal !== undefined) break;
        }
      }
      if (refusal !== undefined) throw refusal;
      if (opts.failFast) {
        throw new TriadError(
          ErrorCode.Unavailable,
          `cannot connect to NATS at ${s.servers.join(', ')}: ${errorMessage(e)}; start nats-server with JetStream (nats-server -js) or set ${s.labels.NATS_URL}`,
          { cause: e },
        );
      }
      await sleep(RETRY_WAIT_MS);
    }
  }
}

/** The server's answer to a JetStream request in an account without JetStream (a client's, decision 0022). */
export function isJetStreamNotEnabled(e: unknown): boolean {
  for (let c: unknown = e, depth = 0; c instanceof Error && depth < 5; c = c.cause, depth++) {
    if (/jetstream not enabled for account/i.test(c.message) || (c as { code?: unknown }).code === 10039) return true;
  }
  return false;
}

/**
 * The explained error when a JetStream request met an account without JetStream — a client identity's
 * own account (decision 0022), or a server without -js — else undefined.
 */
export function explainNoJetStream(e: unknown, namespace: string): TriadError | undefined {
  if (!isJetStreamNotEnabled(e)) return undefined;
  return new TriadError(
    ErrorCode.InvalidConfig,
    `NATS says this connection's account has no JetStream (${errorMessage(e)}): its credentials are a client's (triad auth init gives each client an account of its own, without streams) or the server runs without JetStream; run this process with its own role's credentials for namespace "${namespace}" (the NATS_NKEY_SEED of its .env from triad auth init), on a server started with -js`,
    { cause: e },
  );
}
