/**
 * The scheduler service: `node apps/scheduler/dist/main.js` (config from NATS_URL, REDIS_URL, TRIAD_NAMESPACE
 * and the NATS credentials and TLS settings: README, Configuration).
 */
import { connectBus, serviceInboxPrefix } from '@triad/bus';
import { Scheduler } from '@triad/scheduler';
import { runService } from '@triad/service';
import { payloadSettingsFromEnv } from '@triad/settings';
import { Leases, LimitCache, LimitStore, TaskStore, connectStore } from '@triad/store';

runService('scheduler', async ({ config, log, onShutdown, healthy, fail }) => {
  const redis = await connectStore(config.redis, {}, { onFatal: fail });
  onShutdown(() => void redis.disconnect());
  const bus = await connectBus({ ...config.nats, namespace: config.namespace, name: 'triad-scheduler', inboxPrefix: serviceInboxPrefix(config.namespace, 'scheduler'), onFatal: fail });
  onShutdown(() => bus.close());
  const scheduler = new Scheduler({
    bus,
    tasks: new TaskStore(redis, config.namespace, { waitReplicas: config.redisWaitReplicas, waitMs: config.redisWaitMs, limits: new LimitCache(new LimitStore(redis, config.namespace), { log, refreshMs: config.limitsRefreshMs }) }),
    leases: new Leases(redis, config.namespace),
    logger: log,
    maxObjectBytes: payloadSettingsFromEnv(process.env).maxObjectBytes,
    ...(config.stepBatches === 'off' ? { stepBatchMax: 1 } : {}),
    clientActiveTasks: config.clientActiveTasks,
    eventBatches: config.eventBatches === 'on',
  });
  await scheduler.start();
  onShutdown(() => scheduler.stop());
  healthy({ nats: () => bus.isConnected(), redis: () => redis.status === 'ready' });
});
