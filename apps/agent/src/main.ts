/**
 * The generic agent host: `node apps/agent/dist/main.js <module> [<module>...]` loads the agents each
 * module exports (any export made with defineAgent, or an array of them) and runs them.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { connectBus, serviceInboxPrefix } from '@triad/bus';
import { AgentHost, type AgentDefinition } from '@triad/agent';
import { runService } from '@triad/service';
import { payloadSettingsFromEnv } from '@triad/settings';

function isAgent(v: unknown): v is AgentDefinition {
  return typeof v === 'object' && v !== null && typeof (v as AgentDefinition).name === 'string' && typeof (v as AgentDefinition).handler === 'function';
}

export async function loadAgents(modules: readonly string[]): Promise<AgentDefinition[]> {
  const found = new Map<string, AgentDefinition>();
  for (const m of modules) {
    const mod = (await import(pathToFileURL(resolve(m)).href)) as Record<string, unknown>;
    for (const v of Object.values(mod)) {
      for (const a of Array.isArray(v) ? v : [v]) if (isAgent(a)) found.set(a.name, a);
    }
  }
  return [...found.values()];
}

runService('agent-host', async ({ config, log, onShutdown, healthy, fail }) => {
  const modules = process.argv.slice(2);
  if (modules.length === 0) throw new Error('name at least one module that exports agents: node apps/agent/dist/main.js ./my-agents.js');
  const agents = await loadAgents(modules);
  if (agents.length === 0) throw new Error(`no agents found in ${modules.join(', ')}: export them made with defineAgent()`);
  // NATS only: an agent holds no Redis connection (decision 0010).
  const bus = await connectBus({ ...config.nats, namespace: config.namespace, name: 'triad-agent', inboxPrefix: serviceInboxPrefix(config.namespace, 'agent', agents.map((a) => a.name)), onFatal: fail });
  onShutdown(() => bus.close());
  const host = new AgentHost({ bus, agents, logger: log, ...payloadSettingsFromEnv(process.env) });
  await host.start();
  onShutdown(() => host.stop());
  healthy({ nats: () => bus.isConnected(), serving: () => host.serving() });
});
