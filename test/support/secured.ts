// A deployment secured as a user secures one (docs/security.md): `triad auth init` run by the CLI for each
// namespace, one nats-server loading every namespace's accounts file, one Redis loading their ACL files
// (plus an admin user for the test's own looks), and each identity's .env read back, pointed at them.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { startNats, startRedis, type NatsServer, type RedisServer, type Teardown } from '../harness/index.js';
import { ROOT, SCRIPTS } from './triad.js';

const run = promisify(execFile);

export interface SecuredNamespace {
  namespace: string;
  agents: string[];
  clients: string[];
}

export interface SecuredDeployment {
  /** Where auth init wrote each namespace's files: `<authRoot>/<namespace>/`. */
  authRoot: string;
  nats: NatsServer;
  redis: RedisServer;
  /** A Redis user that may do anything (the test's own reads; the scheduler's Lua needs none of it). */
  admin: { user: string; password: string };
  /** The REDIS_URL of the admin user. */
  adminRedisUrl: string;
  /** An identity's .env (`scheduler`, `client-web`, `agent-payment`, `operator`…), pointed at the test's servers. */
  env(namespace: string, identity: string): Promise<Record<string, string>>;
}

export async function startSecured(td: Teardown, namespaces: readonly SecuredNamespace[]): Promise<SecuredDeployment> {
  const authRoot = await mkdtemp(join(tmpdir(), 'triad-auth-'));
  for (const d of namespaces) {
    const clients = d.clients.length > 0 ? ['--clients', d.clients.join(',')] : [];
    await run(process.execPath, [SCRIPTS.cli, 'auth', 'init', '--dir', join(authRoot, d.namespace), '--namespace', d.namespace, '--agents', d.agents.join(','), ...clients], { cwd: ROOT });
  }
  const acl = new Set<string>();
  for (const d of namespaces) for (const l of (await readFile(join(authRoot, d.namespace, 'redis-users.acl'), 'utf8')).split('\n')) if (l.trim()) acl.add(l);
  const admin = { user: 'admin', password: 'admin-secret' };
  // The harness writes the configuration into the server's data directory (a sibling of authRoot under
  // the temporary folder): includes are relative to it. Every namespace's accounts in one block.
  const dataDirOfConfig = join(tmpdir(), 'triad-nats-dir');
  const config = ['accounts {', ...namespaces.map((d) => `  include "${relative(dataDirOfConfig, join(authRoot, d.namespace, 'nats-accounts.conf'))}"`), '}'].join('\n');
  const [nats, redis] = await Promise.all([
    startNats({ teardown: td, config }),
    startRedis({ teardown: td, aclUsers: [...acl, `user ${admin.user} on >${admin.password} ~* &* +@all`], probeAuth: admin }),
  ]);
  const env = async (namespace: string, identity: string): Promise<Record<string, string>> => {
    const e: Record<string, string> = {};
    for (const line of (await readFile(join(authRoot, namespace, `${identity}.env`), 'utf8')).split('\n')) {
      const m = /^([A-Z_]+)=(.*)$/.exec(line);
      if (m?.[1] && m[2] !== undefined) e[m[1]] = m[2];
    }
    e['NATS_URL'] = nats.url;
    if (e['REDIS_URL']) e['REDIS_URL'] = e['REDIS_URL'].replace('127.0.0.1:6379', `127.0.0.1:${redis.port}`);
    return e;
  };
  return { authRoot, nats, redis, admin, adminRedisUrl: redis.url.replace('redis://', `redis://${admin.user}:${admin.password}@`), env };
}
