// `npm start` (apps/local) on a machine where nothing listens yet: it starts its own nats-server and Redis
// secured with `triad auth init`'s files under its data directory, runs each actor on its own identity,
// and the CLI run from the repository finds the operator's credentials by itself (decision 0016).
import { mkdtemp, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts, listening, startProcess, uniqueNamespace, waitFor, withTeardown, type ActorProcess } from '../harness/index.js';
import { ROOT, cli } from '../support/triad.js';

const td = withTeardown(afterAll);
let dataDir: string;
let env: Record<string, string>;
let local: ActorProcess;
let natsPort: number;
let redisPort: number;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'triad-local-'));
  const [nats, redis, inventory, payment, shipping, fraud] = await freePorts(6);
  [natsPort, redisPort] = [nats as number, redis as number];
  env = {
    TRIAD_DATA_DIR: dataDir,
    NATS_URL: `nats://127.0.0.1:${natsPort}`,
    REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    TRIAD_NAMESPACE: uniqueNamespace('local'),
    TRIAD_DEMO_INTERVAL_MS: '0',
    INVENTORY_PORT: String(inventory),
    PAYMENT_PORT: String(payment),
    SHIPPING_PORT: String(shipping),
    FRAUD_PORT: String(fraud),
  };
  local = await startProcess({ name: 'npm-start', args: ['apps/local/dist/main.js'], env, cwd: ROOT, readyPattern: /Triad is running/, readyTimeoutMs: 60_000, teardown: td });
}, 90_000);

describe('npm start secures the servers it starts', () => {
  it('says so, and writes the credentials 0600 under its data directory', async () => {
    expect(local.output()).toMatch(/secured: one nkey user per actor/);
    expect(local.output()).toMatch(/secured: ACL users for the scheduler and supervisor/);
    expect((await stat(join(dataDir, 'auth', 'operator.nk'))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(dataDir, 'auth', 'redis-users.acl'), 'utf8')).toMatch(/^user default off\n/);
  });

  it('the CLI completes an order with the local operator credentials it finds by itself', async () => {
    const { TRIAD_NAMESPACE: _ns, ...withoutNamespace } = env;
    const r = await cli({ env: withoutNamespace }, ['submit', 'orders', '--input', '{"orderId":"local-1","amount":5}', '--wait', '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as { status: string }).status).toBe('completed');
  });

  it('without them (another data directory), the same command is refused with a clear message', async () => {
    const r = await cli({ env: { ...env, TRIAD_DATA_DIR: await mkdtemp(join(tmpdir(), 'triad-empty-')) } }, ['list']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/requires credentials and none were given/);
  });

  // Last: it stops npm start.
  it('on SIGTERM stops the servers and actors it started, and exits 0', async () => {
    await local.stop(15_000);
    expect(await local.exited).toBe(0);
    for (const port of [natsPort, redisPort]) {
      await waitFor(async () => !(await listening('127.0.0.1', port)), { timeoutMs: 10_000, what: `port ${port} to be free after npm start stopped` });
    }
  });
});
