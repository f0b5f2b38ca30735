/**
 * Runs the example's agents: `node apps/example-orders/dist/agents.js` (service URLs from INVENTORY_URL,
 * PAYMENT_URL, SHIPPING_URL, FRAUD_URL; ORDERS_AGENTS picks which of them this process serves), and
 * registers the `orders` workflow they serve through a scheduler, so a deployment of one process per
 * actor can take orders without a separate registration step.
 */
import { z } from 'zod';
import { AgentHost } from '@triad/agent';
import { connectBus, serviceInboxPrefix } from '@triad/bus';
import { runService } from '@triad/service';
import { payloadSettingsFromEnv } from '@triad/settings';
import { orderAgents, serviceUrlsFromEnv } from './order-agents.js';
import { registerInBackground, type BackgroundRegistration } from './register-workflow.js';
import { ordersWorkflow } from './workflow.js';

/** ORDERS_REGISTER_WORKFLOW: `false` when the definitions are registered by someone else (an operator, a test). */
function registerFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env['ORDERS_REGISTER_WORKFLOW']?.trim() || 'true';
  const parsed = z.enum(['true', 'false']).safeParse(raw);
  if (!parsed.success) throw new Error(`ORDERS_REGISTER_WORKFLOW=${JSON.stringify(raw)} is not allowed: use true (the default: register the orders workflow at start) or false`);
  return parsed.data === 'true';
}

const AGENT_NAMES = ['inventory', 'fraud', 'payment', 'shipping'] as const;

/**
 * ORDERS_AGENTS: the agent types this process serves, comma-separated (default: all four), so another
 * implementation can serve the rest — e.g. `inventory,payment,shipping` beside the Go fraud agent.
 */
function agentsFromEnv(env: NodeJS.ProcessEnv = process.env): Set<string> {
  const raw = env['ORDERS_AGENTS']?.trim() || AGENT_NAMES.join(',');
  const parsed = z.array(z.enum(AGENT_NAMES)).min(1).safeParse(raw.split(',').map((s) => s.trim()).filter((s) => s !== ''));
  if (!parsed.success) throw new Error(`ORDERS_AGENTS=${JSON.stringify(raw)} is not allowed: list one or more of ${AGENT_NAMES.join(', ')}, comma-separated (e.g. inventory,payment,shipping)`);
  return new Set(parsed.data);
}

runService('order-agents', async ({ config, log, onShutdown, healthy, fail }) => {
  const urls = serviceUrlsFromEnv();
  const register = registerFromEnv();
  const serve = agentsFromEnv();
  const bus = await connectBus({ ...config.nats, namespace: config.namespace, name: 'triad-order-agents', inboxPrefix: serviceInboxPrefix(config.namespace, 'agent', [...serve]), onFatal: fail });
  onShutdown(() => bus.close());
  // NATS only: an agent holds no Redis connection (decision 0010).
  const host = new AgentHost({ bus, agents: orderAgents(urls).filter((a) => serve.has(a.name)), logger: log, ...payloadSettingsFromEnv(process.env) });
  await host.start();
  onShutdown(() => host.stop());
  const definition = ordersWorkflow.toJSON();
  let registration: BackgroundRegistration | undefined;
  if (register) {
    registration = registerInBackground({ natsUrl: config.natsUrl, namespace: config.namespace, definition, log });
    onShutdown(() => registration?.stop());
  } else {
    log.info({ workflow: definition.name }, `ORDERS_REGISTER_WORKFLOW=false: not registering workflow ${definition.name} (register apps/example-orders/orders.workflow.json yourself)`);
  }
  // Healthy once the workflow is registered too: a Compose `depends_on: service_healthy` on the agents
  // then means orders can be submitted (the heartbeat starts within 5 s of the registration).
  healthy({ nats: () => bus.isConnected(), serving: () => host.serving(), workflow: () => registration === undefined || registration.current().state === 'registered' });
  log.info({ urls, agents: [...serve] }, 'order agents calling these services');
});
