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
import { TaskStore, connectRedis, connectStore } from '@triad/store';

/** The supervisor's settings read from the environment: each its variable (the defaults are the schema's). */
const VARIABLES = {
  intervalMs: 'TRIAD_SUPERVISOR_INTERVAL_MS',
  leaseMs: 'TRIAD_SUPERVISOR_LEASE_MS',
  retentionMs: 'TRIAD_RETENTION_MS',
  compactAfterMs: 'TRIAD_COMPACT_AFTER_MS',
} as const satisfies Partial<Record<keyof SupervisorSettings, string>>;

/** The settings from the environment; a bad value is refused with what was wrong and what to set. */
function settingsFrom(env: NodeJS.ProcessEnv, waitReplicas: number): ResolvedSupervisorSettings {
  const settings: SupervisorSettings = { waitReplicas };
  const details: string[] = [];
  for (const [field, variable] of Object.entries(VARIABLES) as [keyof typeof VARIABLES, string][]) {
    const raw = env[variable];
    if (raw === undefined || raw === '') continue;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) details.push(`${variable} must be a number of milliseconds (got "${raw}"); unset it for the default, ${SUPERVISOR_DEFAULTS[field]}`);
    else settings[field] = n;
  }
  if (details.length > 0) throw new TriadError(ErrorCode.InvalidConfig, `invalid supervisor configuration: ${details.join('; ')}`, { details });
  const label = (field: string): string => {
    const variable = VARIABLES[field as keyof typeof VARIABLES] as string | undefined;
    return variable ? `${variable} (got "${env[variable] ?? ''}"; unset it for the default, ${SUPERVISOR_DEFAULTS[field as keyof typeof VARIABLES]})` : field;
  };
  return resolveSupervisorSettings(settings, label);
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
  const supervisor = new Supervisor({ bus, tasks: new TaskStore(redis, config.namespace), leaderRedis, ...(lockRedis.length > 0 ? { lockRedis } : {}), logger: log, ...settings });
  await supervisor.start();
  onShutdown(() => supervisor.stop());
  healthy({ nats: () => bus.isConnected(), redis: () => redis.status === 'ready' && leaderRedis.status === 'ready' });
});
