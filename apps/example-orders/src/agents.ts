/** Runs the example's agents: `node apps/example-orders/dist/agents.js` (service URLs from INVENTORY_URL, PAYMENT_URL, SHIPPING_URL). */
import { AgentHost } from '@triad/agent';
import { connectBus } from '@triad/bus';
import { runService } from '@triad/service';
import { Leases, TaskStore, connectRedis } from '@triad/store';
import { orderAgents, serviceUrlsFromEnv } from './order-agents.js';

runService('order-agents', async ({ config, log, onShutdown, healthy, fail }) => {
  const urls = serviceUrlsFromEnv();
  const bus = await connectBus({ ...config.nats, namespace: config.namespace, name: 'triad-order-agents', onFatal: fail });
  onShutdown(() => bus.close());
  const redis = await connectRedis(config.redis, {}, { onFatal: fail });
  onShutdown(() => void redis.disconnect());
  const host = new AgentHost({ bus, state: { tasks: new TaskStore(redis, config.namespace), leases: new Leases(redis, config.namespace) }, agents: orderAgents(urls), logger: log });
  await host.start();
  onShutdown(() => host.stop());
  healthy(() => !bus.nc.isClosed());
  log.info({ urls }, 'order agents calling these services');
});
