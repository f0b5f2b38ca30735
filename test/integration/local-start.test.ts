// `npm start` (apps/local) on a machine where nothing listens yet: it starts its own nats-server and Redis
// secured with `triad auth init`'s files under its data directory, runs each actor on its own identity,
// and the CLI run from the repository finds the operator's credentials by itself (decision 0016). Its
// data directory holds what an npm start from before decision 0019 left: credentials of the old form, and
// a submission waiting in a stream of NATS' global account — replaced, and moved into the namespace's
// account, the order completes.
import { mkdir, mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetentionPolicy } from '@nats-io/jetstream';
import { connectBus, protocolHeaders } from '@triad/bus';
import { encode, names, type Submission } from '@triad/protocol';
import { freePorts, listening, requireBinary, startProcess, uniqueNamespace, waitFor, withTeardown, type ActorProcess } from '../harness/index.js';
import { ROOT, cli } from '../support/triad.js';

const td = withTeardown(afterAll);
let dataDir: string;
let env: Record<string, string>;
let local: ActorProcess;
let natsPort: number;
let redisPort: number;
/** The order an older npm start had stored when it stopped. */
const legacyTask = 'before-accounts-1';

/** What npm start before decision 0019 left behind: old-form credentials, and a waiting submission in `$G`. */
async function olderNpmStart(namespace: string): Promise<void> {
  await mkdir(join(dataDir, 'auth'), { recursive: true });
  await writeFile(join(dataDir, 'auth', 'nats-users.conf'), '# written by an older triad auth init\n');
  const nats = await startProcess({
    name: 'older-nats',
    command: requireBinary('nats-server', { by: 'local-start.test.ts' }),
    args: ['-a', '127.0.0.1', '-p', String(natsPort), '-js', '-sd', join(dataDir, 'nats')],
    readyPattern: /Server is ready/,
    teardown: td,
  });
  const bus = await connectBus({ url: `nats://127.0.0.1:${natsPort}`, namespace, name: 'older-client', failFast: true });
  const n = names(namespace);
  await bus.jsm.streams.add({ name: n.streams.submit, subjects: [n.subjects.submitAll], retention: RetentionPolicy.Workqueue });
  const sub: Submission = { taskId: legacyTask, workflow: 'orders', input: { orderId: 'before', amount: 1 }, submittedAt: Date.now() };
  await bus.js.publish(n.subjects.submit('operator'), encode(sub), { msgID: `operator:${legacyTask}`, headers: protocolHeaders() });
  await bus.close();
  await nats.stop(10_000);
}

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
  await olderNpmStart(env['TRIAD_NAMESPACE'] ?? '');
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

  it("replaced an older npm start's credentials and moved its streams into the namespace's account: the order it had stored completes", async () => {
    expect(local.output()).toMatch(/moved the streams of .*jetstream\/\$G to .*jetstream\/triad:local/);
    await expect(stat(join(dataDir, 'auth', 'nats-users.conf'))).rejects.toThrow(/ENOENT/);
    // The scheduler took it from the moved stream: recorded, or — taken before npm start registered the
    // workflow (a fresh Redis here) — refused for it and dead-lettered, whence a replay brings it back.
    const taken = await waitFor(
      async () => {
        if ((await cli({ env }, ['status', legacyTask, '--json'])).code === 0) return 'recorded';
        const dlq = await cli({ env }, ['dlq', '--source', 'submit', '--json']);
        const seq = (JSON.parse(dlq.stdout || '[]') as { seq: number; original: { value?: { taskId?: string } } }[]).find((d) => d.original.value?.taskId === legacyTask)?.seq;
        return seq === undefined ? undefined : seq;
      },
      { timeoutMs: 60_000, what: `the order ${legacyTask} stored before the upgrade to be taken` },
    );
    if (taken !== 'recorded') {
      const r = await cli({ env }, ['dlq', 'replay', String(taken), '--yes']);
      expect(r.code, r.stderr).toBe(0);
    }
    const done = await waitFor(
      async () => {
        const r = await cli({ env }, ['status', legacyTask, '--json']);
        return r.code === 0 && (JSON.parse(r.stdout) as { status: string }).status === 'completed' ? true : undefined;
      },
      { timeoutMs: 60_000, what: `the order ${legacyTask} stored before the upgrade to complete` },
    );
    expect(done).toBe(true);
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
