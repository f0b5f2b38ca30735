/** Runs the example's agents: `node apps/example-orders/dist/agents.js` (service URLs from INVENTORY_URL, PAYMENT_URL, SHIPPING_URL). */
import { AgentHost } from '@triad/agent';
import { connectBus } from '@triad/bus';
import { runService } from '@triad/service';
import { orderAgents, serviceUrlsFromEnv } from './order-agents.js';

runService('order-agents', async ({ config, log, onShutdown, healthy }) => {
  const urls = serviceUrlsFromEnv();
  const bus = await connectBus({ url: config.natsUrl, namespace: config.namespace, name: 'triad-order-agents' });
  onShutdown(() => bus.close());
  // NATS only: an agent holds no Redis connection (decision 0010).
  const host = new AgentHost({ bus, agents: orderAgents(urls), logger: log });
  await host.start();
  onShutdown(() => host.stop());
  healthy(() => !bus.nc.isClosed());
  log.info({ urls }, 'order agents calling these services');
});
