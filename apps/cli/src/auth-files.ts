/**
 * `triad auth init`'s files: a nats-server configuration include with one nkey user per identity and its
 * permissions, a Redis ACL file with a user per Redis role, and one .env per identity (decision 0016).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createUser } from '@nats-io/nkeys';
import { z } from 'zod';
import { ClientIdSchema, NameSchema, NamespaceSchema, OPERATOR_CLIENT_ID, deploymentIdentities, redisAclLine, type Identity } from '@triad/protocol';

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
  force: z.boolean().default(false),
});
export type AuthInitInput = z.input<typeof AuthInitSchema>;

export interface AuthInitResult {
  dir: string;
  identities: { name: string; role: string; env: string }[];
  files: string[];
}

/** A variable name for nats-server's configuration (letters, digits, `_`). */
function confVar(namespace: string, name: string): string {
  return `TRIAD_${namespace}_${name}`.replace(/[^A-Za-z0-9_]/g, '_').toUpperCase();
}

function quote(s: string): string {
  return JSON.stringify(s);
}

function natsUser(id: Identity, publicKey: string): string {
  const list = (xs: string[]): string => `[\n${xs.map((x) => `        ${quote(x)}`).join('\n')}\n      ]`;
  return [
    `{`,
    `  nkey: ${publicKey}`,
    `  permissions: {`,
    `    publish: { allow: ${list(id.nats.publish)} }`,
    `    subscribe: { allow: ${list(id.nats.subscribe)} }`,
    `  }`,
    `}`,
  ].join('\n');
}

/** The Redis user of a Redis role (scheduler/supervisor) of a namespace. */
export function redisUserName(namespace: string, identity: string): string {
  return `triad-${namespace}-${identity}`;
}

/** Files `auth init` writes for this input (for the overwrite check). */
export function authFileNames(ids: readonly Identity[]): string[] {
  return ['nats-server.conf', 'nats-users.conf', 'redis-users.acl', ...ids.flatMap((i) => [`${i.name}.env`, `${i.name}.nk`, `${i.name}.pub`])];
}

/** Writes the files; refuses to replace existing ones unless `force` (new keys would lock out running processes). */
export async function authInit(input: AuthInitInput): Promise<AuthInitResult> {
  const o = AuthInitSchema.parse(input);
  const dir = resolve(o.dir);
  const ids = deploymentIdentities({ namespace: o.namespace, agents: o.agents, clients: o.clients });
  const files = authFileNames(ids);
  const existing = files.filter((f) => existsSync(join(dir, f)));
  if (existing.length > 0 && !o.force) {
    throw new Error(
      `${dir} already holds ${existing.join(', ')}: not replacing them (new keys and passwords would lock out every process using the old ones); add --force to replace them, or choose another --dir`,
    );
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const seedsAt = o.mountDir ?? dir;
  const natsVars: string[] = [];
  // Redis refuses comments in an ACL file: the file is users only, the default user off first.
  const aclLines = ['user default off'];
  const out: AuthInitResult['identities'] = [];
  for (const id of ids) {
    const kp = createUser();
    const seed = new TextDecoder().decode(kp.getSeed());
    const publicKey = kp.getPublicKey();
    const seedFile = join(dir, `${id.name}.nk`);
    await writeFile(seedFile, `${seed}\n`, { mode: 0o600 });
    await chmod(seedFile, 0o600);
    // The public key beside the seed (`U…`): libraries that sign with a seed but need the public key too
    // (nats.c's natsOptions_SetNKey) would otherwise derive it. Not secret.
    await writeFile(join(dir, `${id.name}.pub`), `${publicKey}\n`, { mode: 0o644 });
    natsVars.push(`# ${id.name} (${id.role})\n${confVar(o.namespace, id.name)} = ${natsUser(id, publicKey)}`);
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
    await writeFile(envFile, body, { mode: 0o600 });
    await chmod(envFile, 0o600);
    out.push({ name: id.name, role: id.role, env: envFile });
  }
  // nats-server rejects a variable no one uses: a configuration that includes nats-users.conf lists them all.
  await writeFile(
    join(dir, 'nats-users.conf'),
    [
      `# NATS users of Triad namespace "${o.namespace}" (triad auth init): one nkey user per identity, with just its permissions.`,
      `# Several namespaces on one server: include each namespace's file and list all their variables in one users array.`,
      ...natsVars,
      '',
    ].join('\n\n'),
    { mode: 0o644 },
  );
  await writeFile(
    join(dir, 'nats-server.conf'),
    [
      `# Include from the nats-server configuration (include "<path relative to it>/nats-server.conf"); reload with nats-server --signal reload.`,
      `include "nats-users.conf"`,
      `authorization {`,
      `  users = [`,
      ...ids.map((i) => `    ${'$'}${confVar(o.namespace, i.name)}`),
      `  ]`,
      `}`,
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  // 0644: it holds only SHA-256 hashes of random passwords, and redis-server (its own user in a container) must read it.
  await writeFile(join(dir, 'redis-users.acl'), `${aclLines.join('\n')}\n`, { mode: 0o644 });
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
