/** `triad auth init`: the credentials and permissions of a least-privilege deployment (decision 0016). */
import type { Command } from 'commander';
import type { z } from 'zod';
import { intArg, out, printJson, usageError } from '../io.js';
import { action, examples, optionsOf } from '../options.js';

function list(v: string | undefined): string[] | undefined {
  return v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

const FLAGS: Record<string, string> = { dir: '--dir', namespace: '--namespace', agents: '--agents', clients: '--clients', natsUrl: '--nats-url', redisUrl: '--redis-url', mountDir: '--mount-dir', group: '--group' };

export function register(program: Command): void {
  const auth = program.command('auth').description('credentials and permissions for a secured deployment');
  const cmd = auth
    .command('init')
    .description(
      'write D/nats-server.conf and D/nats-accounts.conf (NATS accounts: one for the namespace\'s services, one per client; nkey users with per-role permissions), D/redis-users.acl (scheduler and supervisor users, default user off) and one D/<identity>.env per identity (its seed file, URLs, namespace)',
    )
    .requiredOption('--dir <dir>', 'folder to write into (created 0700; 0750 with --group)')
    .option('--namespace <ns>', 'the namespace the identities are confined to (default "default", or TRIAD_NAMESPACE)')
    .requiredOption('--agents <types>', 'agent types, comma-separated: one identity each (e.g. inventory,fraud,payment,shipping)')
    .option('--clients <ids>', 'client ids, comma-separated: one identity and one NATS account each (submit, follow own tasks, read-only API); the operator is always written')
    .option('--nats-url <url>', 'NATS_URL written to every .env (default nats://127.0.0.1:4222)')
    .option('--redis-url <url>', 'Redis URL without credentials, written with each user\'s into the scheduler and supervisor .env (default redis://127.0.0.1:6379; a database in its path, /N, is the only one their users may select)')
    .option('--mount-dir <dir>', 'where the processes will see this folder (e.g. /run/triad-auth in containers): the seed paths in the .env files use it')
    .option('--group <gid>', 'a numeric group that may read the folder and the secrets (folder 0750, .nk and .env 0640, owned by the group): --group 1000 for the containers of docker-compose.secured.yml (node 1000:1000, redis 999 in group 1000); root or a member of the group only', intArg(0, 0x7fffffff))
    .option('--force', 'replace existing files (new keys and passwords: processes using the old ones are locked out)')
    .option('--json', 'print what was written as JSON');
  examples(cmd, [
    'triad auth init --dir deploy/auth --namespace shop --agents inventory,fraud,payment,shipping --clients web',
    'sudo triad auth init --dir deploy/auth --agents inventory,fraud,payment,shipping --nats-url nats://nats:4222 --redis-url redis://redis:6379 --mount-dir /run/triad-auth --group 1000',
    'nats-server -js -c deploy/auth/nats-server.conf',
    'redis-server --aclfile deploy/auth/redis-users.acl',
    'env $(cat deploy/auth/scheduler.env | grep -v ^#) npm run start:scheduler',
  ]);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const { AuthInitSchema, authInit } = await import('../auth-files.js');
      const o = optionsOf<{ dir: string; namespace?: string; agents: string; clients?: string; natsUrl?: string; redisUrl?: string; mountDir?: string; group?: number; force?: boolean; json?: boolean }>(self);
      const parsed = AuthInitSchema.safeParse({
        dir: o.dir,
        namespace: o.namespace ?? (process.env['TRIAD_NAMESPACE'] || 'default'),
        agents: list(o.agents),
        clients: list(o.clients) ?? [],
        ...(o.natsUrl !== undefined ? { natsUrl: o.natsUrl } : {}),
        ...(o.redisUrl !== undefined ? { redisUrl: o.redisUrl } : {}),
        ...(o.mountDir !== undefined ? { mountDir: o.mountDir } : {}),
        ...(o.group !== undefined ? { group: o.group } : {}),
        force: o.force === true,
      });
      if (!parsed.success) {
        throw usageError(
          'auth init: invalid options',
          parsed.error.issues.map((i: z.core.$ZodIssue) => {
            const [key, index] = i.path;
            const flag = FLAGS[String(key)] ?? String(key);
            const value = index !== undefined ? ` "${String(list(key === 'agents' ? o.agents : o.clients)?.[Number(index)] ?? '')}"` : '';
            return `${flag}${value}: ${i.message}`;
          }),
        );
      }
      let r;
      try {
        r = await authInit(parsed.data);
      } catch (e) {
        throw usageError(e instanceof Error ? e.message : String(e));
      }
      if (o.json) printJson(r);
      else {
        out(`wrote ${r.files.length} files to ${r.dir}:`);
        out(`  nats-server.conf (+ nats-accounts.conf)  nats-server -js -c ${r.dir}/nats-server.conf (or include it)`);
        out(`  redis-users.acl                        redis-server --aclfile ${r.dir}/redis-users.acl`);
        for (const i of r.identities) out(`  ${i.name}.env${' '.repeat(Math.max(1, 37 - i.name.length - 4))}${i.role}`);
        out(
          o.group === undefined
            ? 'Keep the .nk seeds and .env files secret (mode 0600). Rotate with --force, then reload: nats-server --signal reload, redis-cli ACL LOAD.'
            : `Keep the .nk seeds and .env files secret (mode 0640, group ${o.group}: give that group to no one else). Rotate with --force, then reload: nats-server --signal reload, redis-cli ACL LOAD.`,
        );
      }
      return 0;
    }),
  );
}
