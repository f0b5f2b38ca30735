/**
 * `triad auth init`'s files: a nats-server configuration with the namespace's NATS accounts (one for its
 * services, one per client) and one nkey user per identity with its permissions, a Redis ACL file with a
 * user per Redis role, and one .env per identity (decisions 0016, 0022).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createUser } from '@nats-io/nkeys';
import { z } from 'zod';
import { ClientIdSchema, NameSchema, NamespaceSchema } from '@triad/protocol';
import { OPERATOR_CLIENT_ID, deploymentAccounts, deploymentIdentities, redisAclLine, type Identity, type NatsAccount } from '@triad/permissions';

export const AuthInitSchema = z.object({
  dir: z.string().min(1, '--dir must name a folder (e.g. --dir deploy/auth)'),
  namespace: NamespaceSchema.default('default'),
  agents: z.array(NameSchema.describe('agent type')).min(1, '--agents must name at least one agent type (e.g. --agents inventory,payment)'),
  clients: z
    .array(ClientIdSchema.refine((c) => c !== OPERATOR_CLIENT_ID, `"${OPERATOR_CLIENT_ID}" is the operator's own client id: choose another client name`))
    .default([]),
  natsUrl: z.string().regex(/^(nats|tls):\/\/[^\s@]+$/, 'a NATS URL is nats://HOST:PORT (no credentials in it)').default('nats://127.0.0.1:4222'),
  redisUrl: z
    .string()
    .regex(/^rediss?:\/\/[^\s@/]+(\/\d+)?$/, 'a Redis URL is redis://HOST:PORT or rediss://HOST:PORT, without credentials (auth init adds each user\'s)')
    .default('redis://127.0.0.1:6379'),
  /** Where the .env files say the seeds are: the folder as the processes see it (a container's mount), default the folder itself. */
  mountDir: z.string().min(1).optional(),
  /**
   * A group that may read the folder and the secrets (folder 0750, seeds and .env files 0640, owned by that
   * group) — the containers' users (node 1000:1000, redis:7-alpine's redis 999 in group 1000) read them
   * without the files becoming readable by everyone. Absent: the folder 0700 and the secrets 0600.
   */
  group: z.number().int('--group must be a numeric group id (e.g. --group 1000)').min(0, '--group must be a numeric group id (e.g. --group 1000)').max(0x7fffffff).optional(),
  force: z.boolean().default(false),
});
export type AuthInitInput = z.input<typeof AuthInitSchema>;

export interface AuthInitResult {
  dir: string;
  identities: { name: string; role: string; env: string }[];
  files: string[];
}

function quote(s: string): string {
  return JSON.stringify(s);
}

/** One nats-server user: the identity's nkey and its permissions (indented for an account's `users`). */
export function natsUser(id: Identity, publicKey: string): string {
  const list = (xs: string[]): string => `[\n${xs.map((x) => `            ${quote(x)}`).join('\n')}\n          ]`;
  return [
    `      # ${id.name} (${id.role})`,
    `      {`,
    `        nkey: ${publicKey}`,
    `        permissions: {`,
    `          publish: { allow: ${list(id.nats.publish)} }`,
    `          subscribe: { allow: ${list(id.nats.subscribe)} }`,
    ...(id.nats.allowResponses ? [`          allow_responses: true`] : []),
    `        }`,
    `      }`,
  ].join('\n');
}

/**
 * The namespace's accounts as nats-server configuration, to be included inside an `accounts { }` block
 * (decision 0022). `users` renders each account's users by identity name; `extraUsers` adds more users
 * (already rendered) to an account by name — tests add an unrestricted one to the namespace's account.
 */
export function natsAccountsConfig(accounts: readonly NatsAccount[], users: (identity: string) => string, extraUsers: Record<string, string[]> = {}): string {
  const blocks = accounts.map((a) => {
    const lines = [`  ${quote(a.name)} {`];
    if (a.jetstream) lines.push('    jetstream: enabled');
    lines.push('    users = [', ...a.identities.map(users), ...(extraUsers[a.name] ?? []).map((u) => `      ${u}`), '    ]');
    if (a.exports.length > 0) {
      lines.push('    exports = [', ...a.exports.map((e) => `      { ${e.kind}: ${quote(e.subject)}, accounts: [${e.accounts.map(quote).join(', ')}] }`), '    ]');
    }
    if (a.imports.length > 0) {
      lines.push('    imports = [', ...a.imports.map((i) => `      { ${i.kind}: { account: ${quote(i.account)}, subject: ${quote(i.subject)} } }`), '    ]');
    }
    lines.push('  }');
    return lines.join('\n');
  });
  return `${blocks.join('\n')}\n`;
}

/** The Redis user of a Redis role (scheduler/supervisor) of a namespace. */
export function redisUserName(namespace: string, identity: string): string {
  return `triad-${namespace}-${identity}`;
}

/** Files `auth init` writes for this input (for the overwrite check). */
export function authFileNames(ids: readonly Identity[]): string[] {
  return ['nats-server.conf', 'nats-accounts.conf', 'redis-users.acl', ...ids.flatMap((i) => [`${i.name}.env`, `${i.name}.nk`, `${i.name}.pub`])];
}

/** What older versions wrote and this one no longer does: removed by a `--force` run (decision 0022). */
const OBSOLETE_FILES = ['nats-users.conf'];

/** Writes the files; refuses to replace existing ones unless `force` (new keys would lock out running processes). */
export async function authInit(input: AuthInitInput): Promise<AuthInitResult> {
  const o = AuthInitSchema.parse(input);
  const dir = resolve(o.dir);
  const redisDb = Number(new URL(o.redisUrl).pathname.slice(1) || '0');
  const deployment = { namespace: o.namespace, agents: o.agents, clients: o.clients, redisDb };
  const ids = deploymentIdentities(deployment);
  const files = authFileNames(ids);
  const existing = [...files, ...OBSOLETE_FILES].filter((f) => existsSync(join(dir, f)));
  if (existing.length > 0 && !o.force) {
    throw new Error(
      `${dir} already holds ${existing.join(', ')}: not replacing them (new keys and passwords would lock out every process using the old ones); add --force to replace them, or choose another --dir`,
    );
  }
  const secretMode = o.group === undefined ? 0o600 : 0o640;
  await mkdir(dir, { recursive: true, mode: o.group === undefined ? 0o700 : 0o750 });
  /** Gives a written file (or the folder) to --group, when given. */
  const share = async (path: string): Promise<void> => {
    if (o.group === undefined) return;
    try {
      await chown(path, -1, o.group);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Error(
        code === 'EPERM'
          ? `cannot give ${path} to group ${o.group}: only root or a member of group ${o.group} may (run auth init with sudo, or name a group you belong to)`
          : `cannot give ${path} to group ${o.group}: ${e instanceof Error ? e.message : String(e)}`,
        { cause: e },
      );
    }
  };
  if (o.group !== undefined) {
    await share(dir);
    await chmod(dir, 0o750);
  }
  const seedsAt = o.mountDir ?? dir;
  const natsUsers = new Map<string, string>();
  // Redis refuses comments in an ACL file: the file is users only, the default user off first.
  const aclLines = ['user default off'];
  const out: AuthInitResult['identities'] = [];
  for (const id of ids) {
    const kp = createUser();
    const seed = new TextDecoder().decode(kp.getSeed());
    const publicKey = kp.getPublicKey();
    const seedFile = join(dir, `${id.name}.nk`);
    await writeFile(seedFile, `${seed}\n`, { mode: secretMode });
    await share(seedFile);
    await chmod(seedFile, secretMode);
    // The public key beside the seed (`U…`): libraries that sign with a seed but need the public key too
    // (nats.c's natsOptions_SetNKey) would otherwise derive it. Not secret.
    await writeFile(join(dir, `${id.name}.pub`), `${publicKey}\n`, { mode: 0o644 });
    await share(join(dir, `${id.name}.pub`));
    natsUsers.set(id.name, natsUser(id, publicKey));
    const env: Record<string, string> = {
      NATS_URL: o.natsUrl,
      NATS_NKEY_SEED: `${seedsAt.replace(/\/$/, '')}/${id.name}.nk`,
      TRIAD_NAMESPACE: o.namespace,
    };
    if (id.clientId !== undefined) env['TRIAD_CLIENT_ID'] = id.clientId;
    if (id.redis) {
      const user = redisUserName(o.namespace, id.name);
      const password = randomBytes(24).toString('hex');
      aclLines.push(redisAclLine(user, createHash('sha256').update(password).digest('hex'), id.redis));
      const u = new URL(o.redisUrl);
      env['REDIS_URL'] = `${u.protocol}//${encodeURIComponent(user)}:${password}@${u.host}${u.pathname === '/' ? '' : u.pathname}`;
    }
    const envFile = join(dir, `${id.name}.env`);
    const body = [
      `# Triad ${id.role}${id.agent ? ` "${id.agent}"` : ''}${id.clientId ? ` (client id ${id.clientId})` : ''} of namespace "${o.namespace}" (triad auth init)`,
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      '',
    ].join('\n');
    await writeFile(envFile, body, { mode: secretMode });
    await share(envFile);
    await chmod(envFile, secretMode);
    out.push({ name: id.name, role: id.role, env: envFile });
  }
  const accounts = deploymentAccounts(deployment);
  await writeFile(
    join(dir, 'nats-accounts.conf'),
    [
      `# NATS accounts of Triad namespace "${o.namespace}" (triad auth init, decision 0022), to include inside an accounts { } block:`,
      `# "${accounts[0]?.name ?? ''}" holds the streams and every identity but the clients; each client has an account of its own`,
      `# that imports only its own subjects. One nkey user per identity, with just its permissions.`,
      `# Several namespaces on one server: accounts { include "a/nats-accounts.conf"  include "b/nats-accounts.conf" }`,
      natsAccountsConfig(accounts, (name) => natsUsers.get(name) ?? ''),
    ].join('\n'),
    { mode: 0o644 },
  );
  await writeFile(
    join(dir, 'nats-server.conf'),
    [
      `# nats-server -c nats-server.conf (or include it from a configuration; paths are relative to it); reload with nats-server --signal reload.`,
      `accounts {`,
      `  include "nats-accounts.conf"`,
      `}`,
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  for (const f of OBSOLETE_FILES) await rm(join(dir, f), { force: true });
  // 0644: it holds only SHA-256 hashes of random passwords, and redis-server (its own user in a container) must read it.
  await writeFile(join(dir, 'redis-users.acl'), `${aclLines.join('\n')}\n`, { mode: 0o644 });
  for (const f of ['nats-accounts.conf', 'nats-server.conf', 'redis-users.acl']) await share(join(dir, f));
  return { dir, identities: out, files: files.map((f) => join(dir, f)) };
}

/** Reads a KEY=VALUE .env file (comments and blank lines skipped). */
export async function readEnvFile(path: string): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const line of (await readFile(path, 'utf8')).split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined) env[m[1]] = m[2];
  }
  return env;
}
