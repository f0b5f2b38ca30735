// `npm start` over what an older `npm start` left in the repository's .triad/ (decision 0022): credentials
// of the old form (nats-users.conf, no accounts) and a submission waiting in a stream of NATS' global
// account. The new start replaces the credentials, moves the streams into the namespace's account, and
// the stored order completes. Run in a built copy of the repository, whose .triad/ is its own.
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetentionPolicy } from '@nats-io/jetstream';
import { connectBus, protocolHeaders } from '@triad/bus';
import { encode, names, type Submission } from '@triad/protocol';
import { freePorts, listening, natsServerArgs, requireBinary, startProcess, uniqueNamespace, waitFor, withTeardown, type ActorProcess } from '../harness/index.js';
import { builtCheckout, shell } from '../support/user-machine.js';

const td = withTeardown(afterAll);
let repo: string;
let dataDir: string;
let env: Record<string, string>;
let local: ActorProcess;
let natsPort: number;
let redisPort: number;
/** The order an older npm start had stored when it stopped. */
const legacyTask = 'before-accounts-1';

/** The checkout's own CLI, with npm start's settings. */
const triad = (args: string): ReturnType<typeof shell> => shell(repo, { ...process.env, ...env } as Record<string, string>, `node apps/cli/bin/triad.js ${args}`);

/** What npm start before decision 0022 left behind: old-form credentials, and a waiting submission in `$G`. */
async function olderNpmStart(namespace: string): Promise<void> {
  await mkdir(join(dataDir, 'auth'), { recursive: true });
  await writeFile(join(dataDir, 'auth', 'nats-users.conf'), '# written by an older triad auth init\n');
  const nats = await startProcess({
    name: 'older-nats',
    command: requireBinary('nats-server', { by: 'local-upgrade.test.ts' }),
    args: natsServerArgs({ port: natsPort, storeDir: join(dataDir, 'nats') }),
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
  repo = builtCheckout(td, 'upgrade');
  dataDir = join(repo, '.triad');
  const [nats, redis, inventory, payment, shipping, fraud] = await freePorts(6);
  [natsPort, redisPort] = [nats as number, redis as number];
  env = {
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
  local = await startProcess({ name: 'npm-start', args: ['apps/local/dist/main.js'], env, cwd: repo, readyPattern: /Triad is running/, readyTimeoutMs: 90_000, teardown: td });
}, 150_000);

describe("npm start over an older npm start's data", () => {
  it("replaces the older credentials and moves its streams into the namespace's account: the order it had stored completes", async () => {
    expect(local.output()).toMatch(/moved the streams of .*jetstream\/\$G to .*jetstream\/triad:local/);
    await expect(stat(join(dataDir, 'auth', 'nats-users.conf'))).rejects.toThrow(/ENOENT/);
    // The scheduler took it from the moved stream: recorded, or — taken before npm start registered the
    // workflow (a fresh Redis here) — refused for it and dead-lettered, whence a replay brings it back.
    const taken = await waitFor(
      async () => {
        if ((await triad(`status ${legacyTask} --json`)).code === 0) return 'recorded';
        const dlq = await triad('dlq --source submit --json');
        const seq = (JSON.parse(dlq.stdout || '[]') as { seq: number; original: { value?: { taskId?: string } } }[]).find((d) => d.original.value?.taskId === legacyTask)?.seq;
        return seq === undefined ? undefined : seq;
      },
      { timeoutMs: 60_000, what: `the order ${legacyTask} stored before the upgrade to be taken` },
    );
    if (taken !== 'recorded') {
      const r = await triad(`dlq replay ${String(taken)} --yes`);
      expect(r.code, r.stderr).toBe(0);
    }
    await waitFor(
      async () => {
        const r = await triad(`status ${legacyTask} --json`);
        return r.code === 0 && (JSON.parse(r.stdout) as { status: string }).status === 'completed' ? true : undefined;
      },
      { timeoutMs: 60_000, what: `the order ${legacyTask} stored before the upgrade to complete` },
    );
  });

  it('a new order completes with the operator credentials the CLI finds by itself', async () => {
    const r = await triad(`submit orders --input '{"orderId":"local-1","amount":5}' --wait --json`);
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { status: string }).status).toBe('completed');
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
