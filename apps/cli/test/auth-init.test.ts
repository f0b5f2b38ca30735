// `triad auth init` as a user runs it: the files and their modes, the refusal to overwrite, and options
// refused with the flag and value named.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fromSeed } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';

const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../bin/triad.js');

function triad(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, TRIAD_NAMESPACE: '' } });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe('triad auth init', () => {
  it('writes the server files and one .env and 0600 seed per identity, then refuses to overwrite them without --force', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'triad-auth-init-')), 'auth');
    const first = triad(['auth', 'init', '--dir', dir, '--namespace', 'shop', '--agents', 'payment,shipping', '--clients', 'web', '--redis-url', 'redis://redis:6379']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    for (const name of ['scheduler', 'supervisor', 'agent-payment', 'agent-shipping', 'client-web', 'operator']) {
      expect(statSync(join(dir, `${name}.nk`)).mode & 0o777, name).toBe(0o600);
      expect(statSync(join(dir, `${name}.env`)).mode & 0o777, name).toBe(0o600);
      expect(readFileSync(join(dir, `${name}.nk`), 'utf8')).toMatch(/^SU[A-Z2-7]{56}\n$/);
      // The public key beside it, the one nats-accounts.conf names for this identity.
      const pub = readFileSync(join(dir, `${name}.pub`), 'utf8');
      expect(pub).toBe(`${fromSeed(new TextEncoder().encode(readFileSync(join(dir, `${name}.nk`), 'utf8').trim())).getPublicKey()}\n`);
      expect(readFileSync(join(dir, 'nats-accounts.conf'), 'utf8')).toContain(`nkey: ${pub.trim()}`);
    }
    expect(readFileSync(join(dir, 'scheduler.env'), 'utf8')).toMatch(/^REDIS_URL=redis:\/\/triad-shop-scheduler:[0-9a-f]{48}@redis:6379$/m);
    expect(readFileSync(join(dir, 'agent-payment.env'), 'utf8')).not.toMatch(/REDIS_URL/);
    expect(readFileSync(join(dir, 'client-web.env'), 'utf8')).toMatch(/^TRIAD_CLIENT_ID=web$/m);
    const acl = readFileSync(join(dir, 'redis-users.acl'), 'utf8');
    expect(acl.split('\n')[0]).toBe('user default off');
    expect(acl).not.toMatch(/[0-9a-f]{48}@/);
    // NATS accounts (decision 0022): the namespace's, with every identity but the client, and the client's own.
    expect(readFileSync(join(dir, 'nats-server.conf'), 'utf8')).toMatch(/^accounts \{\n {2}include "nats-accounts\.conf"\n\}$/m);
    const accounts = readFileSync(join(dir, 'nats-accounts.conf'), 'utf8');
    expect(accounts).toContain('"triad:shop" {\n    jetstream: enabled');
    expect(accounts).toContain('"triad:shop:client:web" {');
    expect(accounts).toContain('{ service: "triad.shop.submit.web", accounts: ["triad:shop:client:web"] }');
    expect(accounts).toContain('{ stream: { account: "triad:shop", subject: "_INBOX.shop.web.>" } }');
    expect(accounts.match(/allow_responses: true/g)).toHaveLength(1);
    expect(existsSync(join(dir, 'nats-users.conf'))).toBe(false);
    // nats-server itself accepts the configuration.
    const check = spawnSync('nats-server', ['-c', join(dir, 'nats-server.conf'), '-t'], { encoding: 'utf8' });
    expect(check.error, 'nats-server on the PATH (Debian: apt-get install -y nats-server)').toBeUndefined();
    expect(check.status, check.stderr + check.stdout).toBe(0);
    // No SELECT for database 0 (ioredis sends none then).
    expect(acl).not.toContain('+select');

    const again = triad(['auth', 'init', '--dir', dir, '--namespace', 'shop', '--agents', 'payment']);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already holds .*scheduler\.nk.*: not replacing them .*add --force/);
    const seed = readFileSync(join(dir, 'scheduler.nk'), 'utf8');
    // The file of an older auth init (one account for all) goes with --force.
    writeFileSync(join(dir, 'nats-users.conf'), '# older\n');
    expect(triad(['auth', 'init', '--dir', dir, '--namespace', 'shop', '--agents', 'payment', '--force']).code).toBe(0);
    expect(readFileSync(join(dir, 'scheduler.nk'), 'utf8')).not.toBe(seed);
    expect(existsSync(join(dir, 'nats-users.conf'))).toBe(false);
  });

  it('confines the Redis users to the database their URL names (decision 0022)', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'triad-auth-init-')), 'auth');
    expect(triad(['auth', 'init', '--dir', dir, '--agents', 'payment', '--redis-url', 'redis://redis:6379/3']).code).toBe(0);
    expect(readFileSync(join(dir, 'scheduler.env'), 'utf8')).toMatch(/^REDIS_URL=redis:\/\/triad-default-scheduler:[0-9a-f]{48}@redis:6379\/3$/m);
    const acl = readFileSync(join(dir, 'redis-users.acl'), 'utf8');
    expect(acl.match(/\+select\|3\b/g)).toHaveLength(2);
    expect(acl).not.toMatch(/\+select(?!\|3)/);
  });

  it('with --group, lets that group (the containers\' users) read the folder and the secrets, and no one else', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'triad-auth-init-')), 'auth');
    // The group the containers of docker-compose.secured.yml run in: node 1000:1000, redis 999 in group 1000.
    const r = triad(['auth', 'init', '--dir', dir, '--agents', 'payment', '--group', '1000']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('mode 0640, group 1000');
    expect(statSync(dir).mode & 0o777).toBe(0o750);
    expect(statSync(dir).gid).toBe(1000);
    for (const name of ['scheduler', 'supervisor', 'agent-payment', 'operator']) {
      for (const ext of ['nk', 'env']) {
        const st = statSync(join(dir, `${name}.${ext}`));
        expect(st.mode & 0o777, `${name}.${ext}`).toBe(0o640);
        expect(st.gid, `${name}.${ext}`).toBe(1000);
      }
    }
    for (const f of ['redis-users.acl', 'nats-server.conf', 'nats-accounts.conf']) expect(statSync(join(dir, f)).gid, f).toBe(1000);
    expect(triad(['auth', 'init', '--dir', dir, '--agents', 'payment', '--group', 'staff']).stderr).toContain('--group');
  });

  it('names each bad option and value', () => {
    const r = triad(['auth', 'init', '--dir', join(tmpdir(), 'never-written'), '--namespace', 'a b', '--agents', 'pay,9x', '--clients', 'operator', '--nats-url', 'nats://u:p@h:4222']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--namespace: a namespace is 1-40 letters');
    expect(r.stderr).toContain('--agents "9x": a name starts with a letter');
    expect(r.stderr).toContain('--clients "operator": "operator" is the operator\'s own client id');
    expect(r.stderr).toContain('--nats-url: a NATS URL is nats://HOST:PORT (no credentials in it)');
  });
});
