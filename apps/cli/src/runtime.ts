/**
 * What a command that runs needs: its connection settings resolved from the flags and the environment,
 * the client's lifecycle, and error reporting with exit codes. Loaded only when a command runs
 * (options.ts declares the flags), since it brings the client, NATS and the schemas.
 */
import type { Command } from 'commander';
import { TriadClient, clientOptionsFromEnv, type ClientOptions } from '@triad/client';
import { ClientIdSchema, DEFAULT_CLIENT_ID, ErrorCode, NamespaceSchema, TriadError, errorMessage } from '@triad/protocol';
import { DEFAULT_NATS_URL, type ConnectionVariable, type SettingLabels } from '@triad/settings';
import { CliError, usageError } from './io.js';
import { optionsOf, type ConnectionOptions } from './options.js';
import { localOperatorSettings } from './local-credentials.js';

type CredentialFlag = 'natsCreds' | 'natsNkeySeed' | 'natsUser' | 'natsPassword' | 'natsToken' | 'natsTlsCa' | 'natsTlsCert' | 'natsTlsKey';

/**
 * Each credentials/TLS flag: its environment variable, its name in messages, and for the auth flags
 * the method it selects (a flag's method replaces the environment's: flags override the environment).
 */
const CREDENTIAL_FLAGS: Record<CredentialFlag, { variable: ConnectionVariable; flag: string; method?: string }> = {
  natsCreds: { variable: 'NATS_CREDS', flag: '--nats-creds', method: 'creds' },
  natsNkeySeed: { variable: 'NATS_NKEY_SEED', flag: '--nats-nkey-seed', method: 'nkey' },
  natsUser: { variable: 'NATS_USER', flag: '--nats-user', method: 'user' },
  natsPassword: { variable: 'NATS_PASSWORD', flag: '--nats-password', method: 'user' },
  natsToken: { variable: 'NATS_TOKEN', flag: '--nats-token', method: 'token' },
  natsTlsCa: { variable: 'NATS_TLS_CA', flag: '--nats-tls-ca' },
  natsTlsCert: { variable: 'NATS_TLS_CERT', flag: '--nats-tls-cert' },
  natsTlsKey: { variable: 'NATS_TLS_KEY', flag: '--nats-tls-key' },
};

export interface Resolved {
  natsUrl: string;
  namespace: string;
  clientId: string;
  requestTimeoutMs: number;
  /** What the client connects with: servers, the one auth method, TLS files. */
  client: ClientOptions;
}

/**
 * The connection settings: flags first, then the environment (NATS_URL, NATS_CREDS, ..., TRIAD_NAMESPACE),
 * then the defaults. An auth flag replaces the environment's auth method (so `--nats-token` wins over an
 * exported NATS_CREDS); `--nats-user` takes its password from NATS_PASSWORD when --nats-password is not given.
 * Messages name the flag when a flag gave the value.
 */
export function resolveConnection(o: ConnectionOptions, env: NodeJS.ProcessEnv = process.env): Resolved {
  if (o.nats !== undefined && o.nats.trim() === '') throw usageError('--nats must not be empty (e.g. --nats nats://127.0.0.1:4222)');
  if (o.namespace !== undefined) {
    const ns = NamespaceSchema.safeParse(o.namespace);
    if (!ns.success) throw usageError(`--namespace "${o.namespace}" is invalid: ${ns.error.issues[0]?.message ?? 'bad namespace'}`);
  }
  if (o.clientId !== undefined) {
    const id = ClientIdSchema.safeParse(o.clientId);
    if (!id.success) throw usageError(`--client-id "${o.clientId}" is invalid: ${id.error.issues[0]?.message ?? 'not a name'}`);
  }
  const merged: NodeJS.ProcessEnv = { ...env };
  const labels: SettingLabels = {};
  const given = (Object.keys(CREDENTIAL_FLAGS) as CredentialFlag[]).filter((f) => o[f] !== undefined);
  const flagMethods = new Set(given.map((f) => CREDENTIAL_FLAGS[f].method).filter((m) => m !== undefined));
  if (flagMethods.size > 0) {
    for (const { variable, method } of Object.values(CREDENTIAL_FLAGS)) if (method !== undefined && !flagMethods.has(method)) delete merged[variable];
  }
  for (const f of given) {
    const { variable, flag } = CREDENTIAL_FLAGS[f];
    merged[variable] = o[f];
    labels[variable] = flag;
  }
  if (o.nats !== undefined) {
    merged['NATS_URL'] = o.nats;
    labels.NATS_URL = '--nats';
  }
  if (o.namespace !== undefined) merged['TRIAD_NAMESPACE'] = o.namespace;
  if (o.clientId !== undefined) merged['TRIAD_CLIENT_ID'] = o.clientId;
  Object.assign(merged, localOperatorSettings(merged)); // npm start's operator, when nothing else is set
  const client = clientOptionsFromEnv(merged, labels);
  return { natsUrl: client.natsUrl ?? DEFAULT_NATS_URL, namespace: client.namespace ?? 'default', clientId: client.clientId ?? DEFAULT_CLIENT_ID, requestTimeoutMs: o.requestTimeout ?? 10_000, client };
}

/** Connects, runs `fn`, and always closes the client (so the process can exit). */
export async function withClient<T>(cmd: Command, fn: (client: TriadClient, conn: Resolved) => Promise<T>): Promise<T> {
  const conn = resolveConnection(optionsOf<ConnectionOptions>(cmd));
  const client = await connectWithin(conn);
  try {
    return await fn(client, conn);
  } finally {
    await client.close().catch(() => undefined);
  }
}

/**
 * Time on top of the request timeout for the connect's own look at a TLS handshake after a timeout
 * (packages/bus/src/tls-probe.ts), so a refused client certificate is reported as such.
 */
const TLS_PROBE_ALLOWANCE_MS = 5_000;

/**
 * How long the connect is tried again when NATS_URL names several servers (a cluster): after losing a
 * node, a NATS cluster elects new JetStream leaders, and its API answers with timeouts or 503s meanwhile.
 */
const CLUSTER_FAILOVER_MS = 30_000;

/** A connect failure that may heal by itself (nothing answering yet, an election): not a refusal or a bad setting. */
function mayHeal(e: unknown): boolean {
  if (e instanceof TriadError && e.code !== ErrorCode.Unavailable) return false;
  return /timeout|timed out|\b503\b|no responders|temporarily unavailable|leader|ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|CONNECTION_REFUSED|cannot connect/i.test(errorMessage(e));
}

/**
 * Connects, giving up after `requestTimeoutMs` (plus the TLS look) — or, against a cluster, after
 * trying again for up to CLUSTER_FAILOVER_MS while the failure may heal.
 */
async function connectWithin(conn: Resolved): Promise<TriadClient> {
  const servers = conn.natsUrl.split(',').filter((s) => s.trim() !== '').length;
  const deadline = Date.now() + (servers > 1 ? CLUSTER_FAILOVER_MS : 0);
  for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await connectOnce(conn);
    } catch (e) {
      if (!mayHeal(e) || Date.now() + delay >= deadline) throw explainConnectFailure(e, conn, servers);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** A connect failure as a TriadError that says what to check (TriadErrors pass through). */
function explainConnectFailure(e: unknown, conn: Resolved, servers: number): unknown {
  if (e instanceof TriadError || e instanceof CliError) return e;
  const cluster = servers > 1 ? ` (tried again for ${CLUSTER_FAILOVER_MS / 1000} s: a cluster that lost a node answers again once it has elected new leaders)` : '';
  return new TriadError(
    ErrorCode.Unavailable,
    `cannot connect to NATS at ${conn.natsUrl}: ${errorMessage(e)}${cluster}; check that nats-server runs with JetStream (nats-server -js) and that --nats / NATS_URL points at it`,
    { cause: e },
  );
}

/**
 * One connect, given up after `requestTimeoutMs` (plus the TLS look): a guard against anything in the
 * connect that would hang a shell. A connection still pending when we give up is left behind; main()
 * exits the process anyway.
 */
async function connectOnce(conn: Resolved): Promise<TriadClient> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new TriadError(
            ErrorCode.Unavailable,
            `cannot connect to NATS at ${conn.natsUrl} within ${conn.requestTimeoutMs} ms: start nats-server with JetStream (nats-server -js), or point --nats / NATS_URL at it`,
          ),
        ),
      conn.requestTimeoutMs + TLS_PROBE_ALLOWANCE_MS,
    );
  });
  try {
    return await Promise.race([
      TriadClient.connect({ ...conn.client, namespace: conn.namespace, requestTimeoutMs: conn.requestTimeoutMs, name: `triad-cli-${process.pid}` }),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Explains a raw NATS/JetStream failure (no stream, no responders) as a TriadError that says what to
 * check; TriadErrors pass through unchanged.
 */
export function explainBusError(e: unknown, what: string, namespace: string): unknown {
  if (e instanceof TriadError || e instanceof CliError) return e;
  const msg = errorMessage(e);
  if (/stream not found|no responders|503|jetstream is not enabled/i.test(msg)) {
    return new TriadError(
      ErrorCode.Unavailable,
      `cannot ${what}: no JetStream stream of namespace "${namespace}" answered (${msg}): is a scheduler running with TRIAD_NAMESPACE=${namespace}? It creates the streams at start-up (and NATS needs JetStream: nats-server -js).`,
      { cause: e },
    );
  }
  return new TriadError(ErrorCode.Unavailable, `cannot ${what}: ${msg}`, { cause: e });
}
