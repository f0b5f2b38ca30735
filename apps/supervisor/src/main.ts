/**
 * The supervisor service: `node apps/supervisor/dist/main.js`. Tunables: TRIAD_SUPERVISOR_INTERVAL_MS
 * (sweep interval, default 1000), TRIAD_SUPERVISOR_LEASE_MS (leadership lease, default 5000) and
 * TRIAD_RETENTION_MS (finished tasks are removed this long after finishing, default 24 h).
 */
import { z } from 'zod';
import { connectBus } from '@triad/bus';
import { runService } from '@triad/service';
import { Supervisor } from '@triad/supervisor';
import { TaskStore, connectRedis } from '@triad/store';

const TuningSchema = z.object({
  intervalMs: z.coerce.number().int().min(10, 'TRIAD_SUPERVISOR_INTERVAL_MS must be at least 10').default(1_000),
  leaseMs: z.coerce.number().int().min(100, 'TRIAD_SUPERVISOR_LEASE_MS must be at least 100').default(5_000),
  retentionMs: z.coerce.number().int().min(0, 'TRIAD_RETENTION_MS must be 0 or more').default(86_400_000),
});

runService('supervisor', async ({ config, log, onShutdown, healthy }) => {
  const tuning = TuningSchema.parse({
    intervalMs: process.env['TRIAD_SUPERVISOR_INTERVAL_MS'] || undefined,
    leaseMs: process.env['TRIAD_SUPERVISOR_LEASE_MS'] || undefined,
    retentionMs: process.env['TRIAD_RETENTION_MS'] || undefined,
  });
  const redis = connectRedis(config.redisUrl);
  onShutdown(() => void redis.disconnect());
  // Leadership renewals get their own connection so they never wait behind sweep traffic.
  const leaderRedis = connectRedis(config.redisUrl, { connectionName: 'triad-supervisor-lease', enableAutoPipelining: false });
  onShutdown(() => void leaderRedis.disconnect());
  const bus = await connectBus({ url: config.natsUrl, namespace: config.namespace, name: 'triad-supervisor' });
  onShutdown(() => bus.close());
  const supervisor = new Supervisor({ bus, tasks: new TaskStore(redis, config.namespace), leaderRedis, logger: log, ...tuning });
  await supervisor.start();
  onShutdown(() => supervisor.stop());
  healthy(() => redis.status === 'ready' && !bus.nc.isClosed());
});
