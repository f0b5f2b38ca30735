/**
 * `npm start`'s credentials: when it starts its own servers and no credentials are configured, it secures
 * them with `triad auth init`'s files under `.triad/auth` (made once, reused while they still match the
 * namespace and URLs and are of the current form) and runs each actor on its own identity (decisions
 * 0016, 0022).
 */
import { existsSync, renameSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { authInit, readEnvFile } from '@triad/cli';
import { triadAccountName } from '@triad/permissions';

export const LOCAL_AGENTS = ['inventory', 'fraud', 'payment', 'shipping'] as const;

export interface LocalAuth {
  dir: string;
  /** nats-server configuration that includes the users (pass with -c). */
  natsConfig: string;
  redisAclFile: string;
  /** Each identity's environment (`scheduler`, `supervisor`, `agent-<type>`, `operator`). */
  env: Record<string, Record<string, string>>;
  /** The NATS account that holds the namespace's streams (decision 0022). */
  account: string;
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
    // Files from before decision 0022 (one account for everyone, nats-users.conf) are replaced.
    if (!existsSync(join(dir, 'nats-accounts.conf')) || existsSync(join(dir, 'nats-users.conf'))) return false;
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
  return { dir, natsConfig, redisAclFile: join(dir, 'redis-users.acl'), env, account: triadAccountName(o.namespace) };
}

/**
 * Moves streams a NATS without accounts kept in its global account (`$G`: npm start before decision 0022)
 * into the namespace's account, so tasks in flight go on. Only on npm start's own store, before its
 * nats-server starts; once the account has a store of its own nothing is moved. Returns what it did.
 */
export function moveGlobalStreams(storeDir: string, account: string): string | undefined {
  const from = join(storeDir, 'jetstream', '$G');
  const to = join(storeDir, 'jetstream', account);
  if (!existsSync(from) || existsSync(to)) return undefined;
  renameSync(from, to);
  return `moved the streams of ${from} to ${to} (NATS account "${account}", decision 0022)`;
}
