/**
 * Opens a Redis connection configured for Triad's actors: REDIS_URL (user, password, rediss://) with
 * REDIS_TLS_CA for a private CA; `connectStore` opens a Redis Cluster instead when TRIAD_REDIS_CLUSTER names
 * its seed nodes (same credentials and TLS, decision 0015). An outage is waited out; refused credentials or a failing TLS handshake
 * are not (retrying cannot fix them): they end the connection with a message naming the setting.
 */
import { readFile } from 'node:fs/promises';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisClient } from './client.js';
import { ErrorCode, TriadError, errorMessage } from '@triad/protocol';
import {
  explainTlsFailure,
  parseRedisSettings,
  tlsFailure,
  unreadableSettingFile,
  type RedisConnectionOptions,
  type RedisSettings,
} from '@triad/settings';

export interface RedisHandlers {
  /** Every connection error; transient ones are retried by the client. */
  onError?: (e: Error) => void;
  /**
   * The connection was refused for good after connectRedis returned (Redis was down at start and then
   * refused the credentials, or they were changed): the client has stopped. Default: onError.
   */
  onFatal?: (e: TriadError) => void;
}

const CA_WHAT = 'the path of a PEM file with the CA certificate that signed the Redis server certificate';

/**
 * The longest connectRedis waits for the first outcome: a paused or unreachable Redis gives neither
 * ready nor an error, and an actor does not wait for Redis to start (its commands queue meanwhile).
 */
const FIRST_OUTCOME_WAIT_MS = 5_000;

/** Where a URL points, without its credentials (for messages). */
function whereOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return 'REDIS_URL';
  }
}

/** The explained error when `e` means the connection cannot work as configured, else undefined. */
export function explainRedisRefusal(e: unknown, s: RedisSettings): TriadError | undefined {
  const l = s.labels;
  const where = whereOf(s.url);
  const message = errorMessage(e);
  if (/\bWRONGPASS\b/.test(message)) {
    const user = decodeURIComponent(new URL(s.url).username);
    return new TriadError(
      ErrorCode.InvalidConfig,
      `Redis at ${where} refused the credentials in ${l.REDIS_URL} (${user ? `user "${user}"` : 'the default user'}): ${message}; check the user name and password in ${l.REDIS_URL} (redis://USER:PASSWORD@HOST:PORT)`,
      { cause: e },
    );
  }
  if (/\bNOAUTH\b/.test(message)) {
    return new TriadError(
      ErrorCode.InvalidConfig,
      `Redis at ${where} requires a password and ${l.REDIS_URL} has none (${message}): set ${l.REDIS_URL} to redis://USER:PASSWORD@HOST:PORT (rediss:// for TLS)`,
      { cause: e },
    );
  }
  const kind = tlsFailure(e);
  if (kind === undefined) return undefined;
  return explainTlsFailure(kind, e, {
    service: 'Redis',
    where,
    ca: { label: l.REDIS_TLS_CA, ...(s.tlsCaFile !== undefined ? { file: s.tlsCaFile } : {}) },
    protocolHint: `check that ${l.REDIS_URL} names the server's TLS port (tls-port): rediss:// speaks TLS only there, redis:// only on its plain port`,
  });
}

/**
 * Connects and waits for the first outcome: ready, or a refusal (rejects with it), or an outage — an
 * error, or no answer within 5 s — (returns; the client keeps retrying and a later refusal goes to `onFatal`).
 */
export async function connectRedis(target: string | RedisConnectionOptions, options: RedisOptions = {}, handlers: RedisHandlers = {}): Promise<Redis> {
  const settings = parseRedisSettings(typeof target === 'string' ? { url: target } : target);
  const ca = await readCa(settings);
  const redis = new Redis(settings.url, {
    ...clientDefaults(),
    ...options,
    ...(ca !== undefined ? { tls: { ...(typeof options.tls === 'object' ? options.tls : {}), ca } } : {}),
  });
  return firstOutcome(redis, settings, handlers);
}

/**
 * The state store's connection: a Redis Cluster when the settings name one (TRIAD_REDIS_CLUSTER), else
 * one Redis (connectRedis). On a cluster the user, password and TLS come from REDIS_URL (its host is not
 * used); commands wait through a failover (the cluster's slots are re-read and the command retried).
 */
export async function connectStore(target: RedisConnectionOptions, options: RedisOptions = {}, handlers: RedisHandlers = {}): Promise<RedisClient> {
  const settings = parseRedisSettings(target);
  if (!settings.cluster) return connectRedis(target, options, handlers);
  const ca = await readCa(settings);
  const url = new URL(settings.url);
  const tls = url.protocol === 'rediss:' ? { ...(typeof options.tls === 'object' ? options.tls : {}), ...(ca !== undefined ? { ca } : {}) } : undefined;
  const cluster = new Cluster(settings.cluster, {
    redisOptions: {
      ...clientDefaults(),
      ...options,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(tls ? { tls } : {}),
    },
    // Off for the reason given in clientDefaults.
    enableAutoPipelining: false,
    // Reads go to primaries: a replica may lag, and every read here decides a write.
    scaleReads: 'master',
    // Through a failover: commands wait in the offline queue and follow MOVED / TRYAGAIN / CLUSTERDOWN.
    enableOfflineQueue: true,
    maxRedirections: 64,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 100,
    retryDelayOnMoved: 0,
    slotsRefreshTimeout: 2_000,
    slotsRefreshInterval: 1_000,
    clusterRetryStrategy: (times) => Math.min(100 * times, 2_000),
  });
  return firstOutcome(cluster, settings, handlers);
}

/** Settings every Triad connection shares (a cluster's node connections too). */
function clientDefaults(): RedisOptions {
  return {
    // Commands wait through a short outage (a Redis restart) instead of failing at once; the callers'
    // NATS messages stay unacknowledged meanwhile and are redelivered if the process gives up.
    maxRetriesPerRequest: null,
    // Off: ioredis' auto-pipelining defers every command to a setImmediate to gather a batch, which
    // cost each Lua transition about 55 µs at low load and gained no throughput in the benchmark
    // (docs/performance.md, round 3); a step makes two transitions on its critical path. Script calls
    // of one turn share a socket write without waiting instead (coalesceWrites in scripts.ts).
    enableAutoPipelining: false,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    connectionName: 'triad',
  };
}

/** The PEM text of REDIS_TLS_CA, checked; undefined when not set. */
async function readCa(settings: RedisSettings): Promise<string | undefined> {
  if (settings.tlsCaFile === undefined) return undefined;
  const label = settings.labels.REDIS_TLS_CA;
  let ca: string;
  try {
    ca = await readFile(settings.tlsCaFile, 'utf8');
  } catch (e) {
    throw unreadableSettingFile(label, settings.tlsCaFile, CA_WHAT, e);
  }
  if (ca.trim() === '') throw unreadableSettingFile(label, settings.tlsCaFile, CA_WHAT);
  // Node ignores a CA that is not a certificate (and then trusts only the public CAs): check.
  if (!ca.includes('-----BEGIN CERTIFICATE-----')) {
    throw new TriadError(ErrorCode.InvalidConfig, `${label} file "${settings.tlsCaFile}" holds no PEM certificate (-----BEGIN CERTIFICATE-----): set ${label} to ${CA_WHAT}`);
  }
  return ca;
}

/**
 * Waits for the first outcome: ready, or a refusal (rejects with it), or an outage — an error, or no
 * answer within 5 s — (returns; the client keeps retrying and a later refusal goes to `onFatal`).
 */
function firstOutcome<C extends RedisClient>(redis: C, settings: RedisSettings, handlers: RedisHandlers): Promise<C> {
  return new Promise<C>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settle();
      resolve(redis);
    }, FIRST_OUTCOME_WAIT_MS);
    const settle = (): void => {
      settled = true;
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    const onReady = (): void => {
      if (settled) return;
      settle();
      resolve(redis);
    };
    // Connection errors are retried by the client; without a listener ioredis prints each one as unhandled.
    redis.on('error', (e: Error) => {
      const refusal = explainRedisRefusal(e, settings);
      if (refusal === undefined) {
        handlers.onError?.(e);
        if (!settled) {
          // Redis is not up yet: do not hold the start; a refusal once it is up goes to onFatal.
          settle();
          resolve(redis);
        }
        return;
      }
      redis.disconnect();
      if (!settled) {
        settle();
        reject(refusal);
      } else if (handlers.onFatal) handlers.onFatal(refusal);
      else handlers.onError?.(refusal);
    });
    redis.once('ready', onReady);
  });
}
