/** Runnable that starts the example's three stand-in services (inventory, payment, shipping) with ports, host and faults from the environment. */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { envPrefix, faultsFromEnv, startRemoteService } from './remote-service.js';
import type { RemoteService } from './remote-service.js';

/** The example's services and their default ports. */
export const EXAMPLE_SERVICES = [
  { name: 'inventory', defaultPort: 7101 },
  { name: 'payment', defaultPort: 7102 },
  { name: 'shipping', defaultPort: 7103 },
  { name: 'fraud', defaultPort: 7104 },
] as const;

function portFromEnv(variable: string, fallback: number, env: NodeJS.ProcessEnv): number {
  const raw = env[variable];
  if (raw === undefined || raw.trim() === '') return fallback;
  const port = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || port > 65535) {
    throw new Error(`${variable}=${JSON.stringify(raw)} is not allowed: expected a whole number from 0 to 65535 (0 = any free port)`);
  }
  return port;
}

/** One status line, e.g. `inventory listening on http://127.0.0.1:7101 (failRate=0 hangRate=0 latencyMs=0)`. */
export function describeService(service: RemoteService): string {
  const f = service.faults();
  return `${service.name} listening on ${service.url} (failRate=${f.failRate} hangRate=${f.hangRate} latencyMs=${f.latencyMs} rateLimit=${f.rateLimit})`;
}

/**
 * Starts inventory, payment and shipping on <NAME>_PORT (defaults 7101..7103) at SERVICES_HOST (default 127.0.0.1), faults from <NAME>_* variables.
 * All configuration is validated before anything listens; if one service fails to start, the others are closed again so no port leaks.
 */
export async function startExampleServices(env: NodeJS.ProcessEnv = process.env): Promise<RemoteService[]> {
  const host = env['SERVICES_HOST']?.trim() || '127.0.0.1';
  const configs = EXAMPLE_SERVICES.map(({ name, defaultPort }) => ({
    name,
    port: portFromEnv(`${envPrefix(name)}_PORT`, defaultPort, env),
    faults: faultsFromEnv(name, env),
  }));
  const started: RemoteService[] = [];
  try {
    for (const config of configs) started.push(await startRemoteService({ ...config, host }));
  } catch (err) {
    await Promise.allSettled(started.map((s) => s.close()));
    throw err;
  }
  return started;
}

async function main(): Promise<void> {
  const services = await startExampleServices();
  for (const service of services) console.log(describeService(service));
  const shutdown = (signal: NodeJS.Signals): void => {
    // A second signal while closing means the operator wants out now.
    process.once(signal, () => process.exit(1));
    void Promise.allSettled(services.map((s) => s.close())).then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

/** True when this module was started directly (node dist/services/main.js), so importing it has no side effects. */
function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main().catch((err: unknown) => {
    console.error(`services: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
