/**
 * The example services' ports for `npm start`: each service's default (7101..7104) when it is free, a
 * free port when something else holds it, or what the user set (`INVENTORY_PORT`, …) as it is. The
 * choice goes to the services and to the agents alike, and is printed.
 */
import { EXAMPLE_SERVICES, envPrefix } from '@triad/example-orders';
import { canListen, freePort } from '@triad/launcher';

export interface ServicePorts {
  /** `<NAME>_PORT` for every service: the environment of the services and of the agents. */
  env: Record<string, string>;
  /** One line for the console, e.g. `inventory :7101, payment :41234 (7102 was taken), …`. */
  summary: string;
}

export async function chooseServicePorts(env: NodeJS.ProcessEnv): Promise<ServicePorts> {
  const host = env['SERVICES_HOST']?.trim() || '127.0.0.1';
  const chosen: Record<string, string> = {};
  const parts: string[] = [];
  for (const { name, defaultPort } of EXAMPLE_SERVICES) {
    const variable = `${envPrefix(name)}_PORT`;
    const set = env[variable]?.trim();
    if (set) {
      // The user's choice stands; the services process validates it and says why if it cannot listen.
      chosen[variable] = set;
      parts.push(`${name} :${set} (${variable})`);
    } else if (await canListen(host, defaultPort)) {
      chosen[variable] = String(defaultPort);
      parts.push(`${name} :${defaultPort}`);
    } else {
      const port = await freePort();
      chosen[variable] = String(port);
      parts.push(`${name} :${port} (${defaultPort} was taken)`);
    }
  }
  return { env: chosen, summary: parts.join(', ') };
}
