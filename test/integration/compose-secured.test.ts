// docker-compose.secured.yml checked without a Docker engine: every process reads its identity from the
// files `triad auth init` writes (run here with the file's own agent types and mount path), nothing in
// `environment:` overrides them, and the servers load the users (decision 0016).
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { ComposeFile, words } from '../support/compose.js';
import { ROOT, SCRIPTS } from '../support/triad.js';

const run = promisify(execFile);
const file = ComposeFile.read(join(ROOT, 'docker-compose.secured.yml'));
const MOUNT = '/run/triad-auth';
const IDENTITY_VARIABLES = ['NATS_URL', 'NATS_NKEY_SEED', 'NATS_CREDS', 'NATS_USER', 'NATS_PASSWORD', 'NATS_TOKEN', 'REDIS_URL', 'TRIAD_NAMESPACE', 'TRIAD_CLIENT_ID'];
let written: string;

function envFiles(name: string): string[] {
  return words(file.service(name)['env_file']);
}

const agentServices = file.serviceNames().filter((n) => file.environment(n)['ORDERS_AGENTS'] !== undefined);
const agentTypes = agentServices.map((n) => file.environment(n)['ORDERS_AGENTS'] ?? '');

beforeAll(async () => {
  written = await mkdtemp(join(tmpdir(), 'triad-compose-auth-'));
  await run(process.execPath, [SCRIPTS.cli, 'auth', 'init', '--dir', written, '--agents', agentTypes.join(','), '--nats-url', 'nats://nats:4222', '--redis-url', 'redis://redis:6379', '--mount-dir', MOUNT], { cwd: ROOT });
});

describe('docker-compose.secured.yml', () => {
  it('runs one agent service per type, none registering workflows (an agent identity may not)', () => {
    expect(agentTypes.sort()).toEqual(['fraud', 'inventory', 'payment', 'shipping']);
    for (const n of agentServices) {
      expect(agentTypes).toContain(file.environment(n)['ORDERS_AGENTS']);
      expect(file.environment(n)['ORDERS_REGISTER_WORKFLOW'], n).toBe('false');
      expect(envFiles(n).map((f) => basename(f)), n).toEqual([`agent-${file.environment(n)['ORDERS_AGENTS'] ?? ''}.env`]);
    }
  });

  it('every Triad process but the example services reads an identity auth init writes, mounted where its seed path points', async () => {
    for (const n of file.builtServiceNames().filter((s) => s !== 'services')) {
      const files = envFiles(n);
      expect(files.length, `${n} has an env_file`).toBe(1);
      const env = await readFile(join(written, basename(files[0] ?? '')), 'utf8');
      const seed = /^NATS_NKEY_SEED=(.+)$/m.exec(env)?.[1] ?? '';
      expect(seed.startsWith(`${MOUNT}/`), `${n}: ${seed}`).toBe(true);
      expect(file.volumes(n).some((v) => v.target === MOUNT), `${n} mounts ${MOUNT}`).toBe(true);
      for (const v of IDENTITY_VARIABLES) expect(file.environment(n)[v], `${n} environment overrides ${v} of its env_file`).toBeUndefined();
    }
    expect(basename(envFiles('scheduler')[0] ?? '')).toBe('scheduler.env');
    expect(basename(envFiles('supervisor')[0] ?? '')).toBe('supervisor.env');
    expect(basename(envFiles('cli')[0] ?? '')).toBe('operator.env');
    expect(basename(envFiles('register')[0] ?? '')).toBe('operator.env');
  });

  it('nats loads the users and redis the ACL file from the mount', () => {
    expect(file.argv('nats').join(' ')).toContain(`-c ${MOUNT}/nats-server.conf`);
    expect(file.argv('redis').join(' ')).toContain(`--aclfile ${MOUNT}/redis-users.acl`);
    for (const n of ['nats', 'redis']) expect(file.volumes(n).some((v) => v.target === MOUNT), n).toBe(true);
  });

  it('cli waits for the registration and every agent', () => {
    const deps = file.dependsOn('cli');
    expect(deps['register']).toBe('service_completed_successfully');
    for (const n of agentServices) expect(deps[n]).toBe('service_healthy');
  });
});
