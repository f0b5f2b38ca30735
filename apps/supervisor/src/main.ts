/**
 * The supervisor service: `node apps/supervisor/dist/main.js`. Tunables: TRIAD_SUPERVISOR_INTERVAL_MS
 * (sweep interval, default 1000), TRIAD_SUPERVISOR_LEASE_MS (leadership lease, default 5000; held with
 * Redlock on the state store, or by quorum on the independent Redis instances of TRIAD_REDLOCK_URLS),
 * TRIAD_RETENTION_MS (finished tasks are removed this long after finishing, default 24 h) and
 * TRIAD_COMPACT_AFTER_MS (a finished task that can never be retried keeps its full record this long,
 * then is compacted; default 10 min, 0 = on the next sweep). Decision 0007.
 */
import { z } from 'zod';
import { connectBus, serviceInboxPrefix } from '@triad/bus';
import { ErrorCode, TriadError } from '@triad/protocol';
import { runService } from '@triad/service';
import { DEFAULT_COMPACT_AFTER_MS, Supervisor } from '@triad/supervisor';
import { MIN_LEASE_MS, TaskStore, connectRedis, connectStore } from '@triad/store';

/** Each tunable: its environment variable, and what a valid value is (said back when one is not). */
const TUNABLES = {
  intervalMs: { env: 'TRIAD_SUPERVISOR_INTERVAL_MS', min: 10, fallback: 1_000, hint: 'the sweep interval in ms, at least 10 (default 1000)' },
  leaseMs: { env: 'TRIAD_SUPERVISOR_LEASE_MS', min: MIN_LEASE_MS, fallback: 5_000, hint: `the leadership lease in ms, at least ${MIN_LEASE_MS} (default 5000)` },
  retentionMs: { env: 'TRIAD_RETENTION_MS', min: 0, fallback: 86_400_000, hint: 'how long finished tasks are kept, in ms, 0 or more (default 86400000 = 24 h)' },
  compactAfterMs: {
    env: 'TRIAD_COMPACT_AFTER_MS',
    min: 0,
    fallback: DEFAULT_COMPACT_AFTER_MS,
    hint: `how long a finished task keeps its full record before it is compacted, in ms, 0 or more (0 = on the next sweep; default ${DEFAULT_COMPACT_AFTER_MS} = 10 min)`,
  },
} as const;
type Tunable = keyof typeof TUNABLES;

const ms = (t: Tunable) => {
  const { env, min, fallback } = TUNABLES[t];
  return z.coerce
    .number({ error: `${env} must be a number of milliseconds` })
    .int(`${env} must be a whole number of milliseconds`)
    .min(min, `${env} must be at least ${min}`)
    .default(fallback);
};

const TuningSchema = z.object({ intervalMs: ms('intervalMs'), leaseMs: ms('leaseMs'), retentionMs: ms('retentionMs'), compactAfterMs: ms('compactAfterMs') });
type Tuning = z.output<typeof TuningSchema>;

/** The supervisor's tunables from the environment; a bad value is refused with what was wrong and what to set. */
function tuningFrom(env: NodeJS.ProcessEnv): Tuning {
  const raw = Object.fromEntries(Object.entries(TUNABLES).map(([k, t]) => [k, env[t.env] || undefined]));
  const parsed = TuningSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((i) => {
    const t = TUNABLES[String(i.path[0]) as Tunable] as (typeof TUNABLES)[Tunable] | undefined;
    return t ? `${i.message} (got "${env[t.env] ?? ''}"); set it to ${t.hint}, or unset it for the default` : i.message;
  });
  throw new TriadError(ErrorCode.InvalidConfig, `invalid supervisor configuration: ${details.join('; ')}`, { details });
}

runService('supervisor', async ({ config, log, onShutdown, healthy, fail }) => {
  const tuning = tuningFrom(process.env);
  const redis = await connectStore(config.redis, {}, { onFatal: fail });
  onShutdown(() => void redis.disconnect());
  // Leadership renewals get their own connection so they never wait behind sweep traffic.
  const leaderRedis = await connectStore(config.redis, { connectionName: 'triad-supervisor-lease', enableAutoPipelining: false }, { onFatal: fail });
  onShutdown(() => void leaderRedis.disconnect());
  // TRIAD_REDLOCK_URLS: the leadership lease on independent Redis instances, by Redlock's quorum (decision 0004).
  const lockRedis = await Promise.all(config.redlock.map((r, i) => connectRedis(r, { connectionName: `triad-supervisor-redlock-${i + 1}`, enableAutoPipelining: false })));
  for (const r of lockRedis) onShutdown(() => void r.disconnect());
  const bus = await connectBus({ ...config.nats, namespace: config.namespace, name: 'triad-supervisor', inboxPrefix: serviceInboxPrefix(config.namespace, 'supervisor'), onFatal: fail });
  onShutdown(() => bus.close());
  const supervisor = new Supervisor({ bus, tasks: new TaskStore(redis, config.namespace), leaderRedis, ...(lockRedis.length > 0 ? { lockRedis } : {}), waitReplicas: config.redisWaitReplicas, logger: log, ...tuning });
  await supervisor.start();
  onShutdown(() => supervisor.stop());
  healthy({ nats: () => bus.isConnected(), redis: () => redis.status === 'ready' && leaderRedis.status === 'ready' });
});
