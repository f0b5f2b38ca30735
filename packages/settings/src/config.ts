/** Process configuration from the environment, validated once at start-up with a clear error. */
import { z } from 'zod';
import { ClientIdSchema, DEFAULT_CLIENT_ID, ErrorCode, NamespaceSchema, TriadError } from '@triad/protocol';
import {
  checkNatsSettings,
  checkRedisSettings,
  natsOptionsFromEnv,
  redisOptionsFromEnv,
  type NatsConnectionOptions,
  type RedisConnectionOptions,
  type SettingLabels,
} from './connection-settings.js';

export const ConfigSchema = z.object({
  namespace: NamespaceSchema.default('default'),
  /** The identity clients and the CLI submit and read under (decision 0010). */
  clientId: ClientIdSchema.default(DEFAULT_CLIENT_ID),
  logLevel: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /**
   * Replicas that must acknowledge a task's creation (and a supervisor election) before it is confirmed:
   * Redis WAIT (decision 0015). 0 on one Redis; 1 on a cluster whose primaries have replicas.
   */
  redisWaitReplicas: z.coerce.number().int().min(0).max(16).default(0),
  /** How long WAIT waits for them, ms. */
  redisWaitMs: z.coerce.number().int().min(1).max(60_000).default(1_000),
  /**
   * Step request batches (decision 0023): `on` — a scheduler sends several requests per message to agents
   * that take them, and an agent host takes them; `off` — one request per message, as before.
   */
  stepBatches: z.enum(['on', 'off'], { message: 'set it to "on" (step request batches, the default) or "off"' }).default('on'),
  /**
   * The most active tasks of one client (decision 0024): a scheduler stores a task over it and starts it
   * when one of the client's tasks ends. 0 turns admission off.
   */
  clientActiveTasks: z.coerce.number().int().min(0).max(10_000_000).default(0),
  /**
   * How often a scheduler or supervisor reads the dispatch limits' registry version (decision 0020 §1.9):
   * a `triad limits set` applies everywhere within this long. One GET per interval per process.
   */
  limitsRefreshMs: z.coerce.number({ message: 'expected a whole number of milliseconds from 100 to 60000 (default 1000)' }).int('expected a whole number of milliseconds from 100 to 60000 (default 1000)').min(100, 'expected a whole number of milliseconds from 100 to 60000 (default 1000)').max(60_000, 'expected a whole number of milliseconds from 100 to 60000 (default 1000)').default(1_000),
  /** TRIAD_EVENT_BATCHES: a scheduler's events to reply subjects that read batches, batched per event-loop turn (decision 0025). */
  eventBatches: z.enum(['on', 'off'], { message: 'set it to "on" (event batches to reply subjects that read them) or "off" (the default)' }).default('off'),
});

export type Config = z.output<typeof ConfigSchema> & {
  /** NATS_URL as given (one server or several, comma-separated), or the default. */
  natsUrl: string;
  /** REDIS_URL as given (it may carry a password: log it through redactUrl), or the default. */
  redisUrl: string;
  /** Everything connectBus needs: servers, the one auth method, TLS files (read when connecting). */
  nats: NatsConnectionOptions;
  /** Everything connectStore needs: REDIS_URL, REDIS_TLS_CA, TRIAD_REDIS_CLUSTER. */
  redis: RedisConnectionOptions;
  /**
   * TRIAD_REDLOCK_URLS: independent Redis instances on which the supervisors' leadership lease is held by
   * Redlock's quorum (decision 0004); empty = the state store alone. REDIS_TLS_CA applies to rediss:// ones.
   */
  redlock: RedisConnectionOptions[];
};

/** The TRIAD_REDLOCK_URLS entries (comma-separated redis:// or rediss:// URLs), each a connection. */
function redlockOptionsFromEnv(env: NodeJS.ProcessEnv): RedisConnectionOptions[] {
  const urls = (env['TRIAD_REDLOCK_URLS'] ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  const tlsCa = env['REDIS_TLS_CA'] || undefined;
  return urls.map((url, i) => ({ url, labels: { REDIS_URL: `TRIAD_REDLOCK_URLS entry ${i + 1}` }, ...(tlsCa !== undefined && /^rediss:/i.test(url) ? { tlsCa } : {}) }));
}

/**
 * Reads and checks the whole configuration; every problem is listed, each naming its variable (or the
 * label a caller gives it, e.g. a CLI flag) and what to set.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, o: { labels?: SettingLabels } = {}): Config {
  const parsed = ConfigSchema.safeParse({
    namespace: env['TRIAD_NAMESPACE'] || undefined,
    clientId: env['TRIAD_CLIENT_ID'] || undefined,
    logLevel: env['TRIAD_LOG_LEVEL'] || undefined,
    redisWaitReplicas: env['TRIAD_REDIS_WAIT_REPLICAS'] || undefined,
    redisWaitMs: env['TRIAD_REDIS_WAIT_MS'] || undefined,
    stepBatches: env['TRIAD_STEP_BATCHES'] || undefined,
    clientActiveTasks: env['TRIAD_CLIENT_ACTIVE_TASKS'] || undefined,
    limitsRefreshMs: env['TRIAD_LIMITS_REFRESH_MS'] || undefined,
    eventBatches: env['TRIAD_EVENT_BATCHES'] || undefined,
  });
  const envName: Record<string, string> = {
    namespace: 'TRIAD_NAMESPACE',
    clientId: 'TRIAD_CLIENT_ID',
    logLevel: 'TRIAD_LOG_LEVEL',
    redisWaitReplicas: 'TRIAD_REDIS_WAIT_REPLICAS',
    redisWaitMs: 'TRIAD_REDIS_WAIT_MS',
    stepBatches: 'TRIAD_STEP_BATCHES',
    clientActiveTasks: 'TRIAD_CLIENT_ACTIVE_TASKS',
    limitsRefreshMs: 'TRIAD_LIMITS_REFRESH_MS',
    eventBatches: 'TRIAD_EVENT_BATCHES',
  };
  const details = parsed.success ? [] : parsed.error.issues.map((i) => `${envName[String(i.path[0])] ?? String(i.path[0])}: ${i.message}`);
  const nats = checkNatsSettings(natsOptionsFromEnv(env, o.labels));
  const redis = checkRedisSettings(redisOptionsFromEnv(env, o.labels));
  details.push(...nats.problems.map((p) => p.message), ...redis.problems.map((p) => p.message));
  const redlock = redlockOptionsFromEnv(env);
  for (const r of redlock) details.push(...checkRedisSettings(r).problems.map((p) => p.message));
  if (!parsed.success || details.length > 0) {
    throw new TriadError(ErrorCode.InvalidConfig, `invalid configuration: ${details.join('; ')}`, { details });
  }
  return {
    ...parsed.data,
    natsUrl: nats.value.servers.join(','),
    redisUrl: redis.value.url,
    nats: natsOptionsFromEnv(env, o.labels),
    redis: redisOptionsFromEnv(env, o.labels),
    redlock,
  };
}
