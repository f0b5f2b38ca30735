/**
 * `npm start`'s credentials: when it starts its own servers and no credentials are configured, it secures
 * them with `triad auth init`'s files under `.triad/auth` (made once, reused while they still match the
 * namespace and URLs) and runs each actor on its own identity (decision 0016).
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { authInit, readEnvFile } from '@triad/cli';

export const LOCAL_AGENTS = ['inventory', 'fraud', 'payment', 'shipping'] as const;

export interface LocalAuth {
  dir: string;
  /** nats-server configuration that includes the users (pass with -c). */
  natsConfig: string;
  redisAclFile: string;
  /** Each identity's environment (`scheduler`, `supervisor`, `agent-<type>`, `operator`). */
  env: Record<string, Record<string, string>>;
}

const AUTH_VARIABLES = ['NATS_CREDS', 'NATS_NKEY_SEED', 'NATS_USER', 'NATS_PASSWORD', 'NATS_TOKEN'];

/** Whether the environment configures NATS credentials itself (then npm start leaves security to it). */
export function natsAuthConfigured(env: NodeJS.ProcessEnv): boolean {
  return AUTH_VARIABLES.some((v) => (env[v] ?? '') !== '');
}

export async function ensureLocalAuth(dataDir: string, o: { namespace: string; natsUrl: string; redisUrl: string }): Promise<LocalAuth> {
  const dir = join(dataDir, 'auth');
  const names = ['scheduler', 'supervisor', ...LOCAL_AGENTS.map((a) => `agent-${a}`), 'operator'];
  const base = (url: string): string => {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  };
  const redisBase = base(o.redisUrl);
  const current = async (): Promise<boolean> => {
    if (!names.every((n) => existsSync(join(dir, `${n}.env`)))) return false;
    const op = await readEnvFile(join(dir, 'operator.env'));
    const sch = await readEnvFile(join(dir, 'scheduler.env'));
    return op['TRIAD_NAMESPACE'] === o.namespace && op['NATS_URL'] === o.natsUrl && sch['REDIS_URL'] !== undefined && base(sch['REDIS_URL']) === redisBase;
  };
  if (!(await current())) {
    await authInit({ dir, namespace: o.namespace, agents: [...LOCAL_AGENTS], natsUrl: o.natsUrl, redisUrl: redisBase, force: true });
  }
  const natsConfig = join(dataDir, 'nats.conf');
  await writeFile(natsConfig, '# npm start: the users of .triad/auth (triad auth init)\ninclude "auth/nats-server.conf"\n');
  const env: LocalAuth['env'] = {};
  for (const n of names) env[n] = await readEnvFile(join(dir, `${n}.env`));
  return { dir, natsConfig, redisAclFile: join(dir, 'redis-users.acl'), env };
}
