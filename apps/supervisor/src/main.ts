/**
 * The supervisor service: `node apps/supervisor/dist/main.js`. Tunables (defaults and limits in
 * @triad/supervisor's SupervisorSettingsSchema): TRIAD_SUPERVISOR_INTERVAL_MS (sweep interval),
 * TRIAD_SUPERVISOR_LEASE_MS (leadership lease; held with Redlock on the state store, or by quorum on the
 * independent Redis instances of TRIAD_REDLOCK_URLS), TRIAD_RETENTION_MS (finished tasks are removed this
 * long after finishing) and TRIAD_COMPACT_AFTER_MS (a finished task that can never be retried keeps its
 * full record this long, then is compacted; 0 = on the next sweep). Decision 0007.
 */
import { connectBus, serviceInboxPrefix } from '@triad/bus';
import { ErrorCode, TriadError } from '@triad/protocol';
import { runService } from '@triad/service';
import { SUPERVISOR_DEFAULTS, Supervisor, resolveSupervisorSettings, type ResolvedSupervisorSettings, type SupervisorSettings } from '@triad/supervisor';
import { LimitCache, LimitStore, TaskStore, connectRedis, connectStore } from '@triad/store';

/** The supervisor's settings read from the environment: each its variable and what it must be (the defaults are the schema's). */
const VARIABLES = {
  intervalMs: { env: 'TRIAD_SUPERVISOR_INTERVAL_MS', hint: 'the sweep interval in ms, at least 10' },
  leaseMs: { env: 'TRIAD_SUPERVISOR_LEASE_MS', hint: 'the leadership lease in ms, at least 200' },
  retentionMs: { env: 'TRIAD_RETENTION_MS', hint: 'how long finished tasks are kept, in ms, 0 or more' },
  compactAfterMs: { env: 'TRIAD_COMPACT_AFTER_MS', hint: 'how long a finished task keeps its full record before it is compacted, in ms, 0 or more (0 = on the next sweep)' },
  objectGcGraceMs: { env: 'TRIAD_OBJECT_GC_GRACE_MS', hint: 'how old an unreferenced payload object must be before it is deleted, in ms, 0 or more' },
} as const satisfies Partial<Record<keyof SupervisorSettings, { env: string; hint: string }>>;
type Variable = keyof typeof VARIABLES;

/** What to do about a bad value of `field`: set it to what it must be, or unset it for the default. */
function advice(field: Variable, env: NodeJS.ProcessEnv): string {
  const v = VARIABLES[field];
  return `(got "${env[v.env] ?? ''}"); set it to ${v.hint}, or unset it for the default (${SUPERVISOR_DEFAULTS[field]})`;
}

/** The settings from the environment; a bad value is refused with what was wrong and what to set. */
function settingsFrom(env: NodeJS.ProcessEnv, waitReplicas: number): ResolvedSupervisorSettings {
  const settings: SupervisorSettings = { waitReplicas };
  const details: string[] = [];
  for (const field of Object.keys(VARIABLES) as Variable[]) {
    const raw = env[VARIABLES[field].env];
    if (raw === undefined || raw === '') continue;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) details.push(`${VARIABLES[field].env} must be a number of milliseconds ${advice(field, env)}`);
    else settings[field] = n;
  }
  if (details.length > 0) throw new TriadError(ErrorCode.InvalidConfig, `invalid supervisor configuration: ${details.join('; ')}`, { details });
  return resolveSupervisorSettings(settings, (field, problem) => (field in VARIABLES ? `${VARIABLES[field as Variable].env}: ${problem} ${advice(field as Variable, env)}` : `${field}: ${problem}`));
}

runService('supervisor', async ({ config, log, onShutdown, healthy, fail }) => {
  const settings = settingsFrom(process.env, config.redisWaitReplicas);
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
  const supervisor = new Supervisor({ bus, tasks: new TaskStore(redis, config.namespace, { limits: new LimitCache(new LimitStore(redis, config.namespace), { log, refreshMs: config.limitsRefreshMs }) }), leaderRedis, ...(lockRedis.length > 0 ? { lockRedis } : {}), logger: log, ...settings });
  await supervisor.start();
  onShutdown(() => supervisor.stop());
  healthy({ nats: () => bus.isConnected(), redis: () => redis.status === 'ready' && leaderRedis.status === 'ready' });
});
