// What an agent written from docs/protocol.md §8 meets under `triad auth init`'s identities (issue #21):
// its durable consumer can be created only through the API subject that names the consumer and its
// filter; and the example's agents, started before any scheduler, wait for the streams without a single
// permission violation in nats-server's log (they used to try to create the streams themselves).
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, type Bus } from '@triad/bus';
import { ordersWorkflow } from '@triad/example-orders';
import { startNats, startRedis, uniqueNamespace, waitFor, withTeardown, type ActorProcess, type NatsServer, type RedisServer } from '../harness/index.js';
import { ROOT, SCRIPTS, startTriad, type TestTriad } from '../support/triad.js';

const run = promisify(execFile);
const td = withTeardown(afterAll);
const AGENTS = ['inventory', 'fraud', 'payment', 'shipping'];
const ns = uniqueNamespace('agp');
let authDir: string;
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;
let agents: ActorProcess[];
const ADMIN = { user: 'admin', password: 'admin-secret' };

async function identityEnv(name: string): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const line of (await readFile(join(authDir, `${name}.env`), 'utf8')).split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (m?.[1] && m[2] !== undefined) env[m[1]] = m[2];
  }
  env['NATS_URL'] = nats.url;
  if (env['REDIS_URL']) env['REDIS_URL'] = env['REDIS_URL'].replace('127.0.0.1:6379', `127.0.0.1:${redis.port}`);
  return env;
}

/** The lines of nats-server's log that report a refused publish or subscribe. */
const violations = (): string[] => nats.log().split('\n').filter((l) => / - (Publish|Subscription) Violation - /.test(l));

beforeAll(async () => {
  authDir = await mkdtemp(join(tmpdir(), 'triad-agent-auth-'));
  await run(process.execPath, [SCRIPTS.cli, 'auth', 'init', '--dir', authDir, '--namespace', ns, '--agents', AGENTS.join(',')], { cwd: ROOT });
  const acl = (await readFile(join(authDir, 'redis-users.acl'), 'utf8')).split('\n').filter((l) => l.trim() !== '');
  [nats, redis] = await Promise.all([
    // The configuration lands in the server's own temp directory: include auth init's file as the docs say.
    startNats({ teardown: td, config: `include "../${basename(authDir)}/nats-server.conf"\n` }),
    startRedis({ teardown: td, aclUsers: [...acl, `user ${ADMIN.user} on >${ADMIN.password} ~* &* +@all`], probeAuth: ADMIN }),
  ]);
  const [scheduler, supervisor, operator] = await Promise.all(['scheduler', 'supervisor', 'operator'].map((n) => identityEnv(n)));
  // No scheduler yet: the streams do not exist when the agents start.
  t = await startTriad(
    td,
    { nats, redis: { url: redis.url.replace('redis://', `redis://${ADMIN.user}:${ADMIN.password}@`) } },
    { namespace: ns, schedulers: 0, supervisor: false, agentProcesses: 0, registerOrders: false, roleEnv: { scheduler: scheduler!, supervisor: supervisor!, client: operator! } },
  );
  agents = await Promise.all(AGENTS.map(async (a) => t.startAgents({ ...(await identityEnv(`agent-${a}`)), ORDERS_AGENTS: a })));
}, 120_000);

describe('agents started before any scheduler, under least privilege', () => {
  it('wait for the steps stream, then serve: no permission violation in the server log', async () => {
    for (const a of agents) await a.waitForOutput(/waiting for the steps stream/, 30_000);
    await t.startScheduler();
    await t.startSupervisor();
    await t.client.registerWorkflow(ordersWorkflow);
    for (const a of agents) await a.waitForOutput(/agent host attached/, 30_000);
    const done = await t.client.run('orders', { orderId: 'agp-1', amount: 5 }, { timeoutMs: 60_000 });
    expect(done.status).toBe('completed');
    expect(violations()).toEqual([]);
  });
});

describe("an agent's durable consumer (protocol §8)", () => {
  let agent: Bus;
  const js = (): { steps: string; durable: string; filter: string } => ({ steps: agent.names.streams.steps, durable: agent.names.consumers.agent('payment'), filter: agent.names.subjects.step('payment') });
  const config = (): Record<string, unknown> => ({
    durable_name: js().durable,
    ack_policy: 'explicit',
    deliver_policy: 'all',
    filter_subject: js().filter,
    ack_wait: 5_000_000_000,
    max_deliver: -1,
    max_ack_pending: 10_000,
  });
  const request = async (subject: string, body: unknown): Promise<Record<string, unknown>> =>
    (await agent.nc.request(subject, JSON.stringify(body), { timeout: 5_000 })).json<Record<string, unknown>>();

  beforeAll(async () => {
    const env = await identityEnv('agent-payment');
    agent = await connectBus({ url: nats.url, nkeySeed: env['NATS_NKEY_SEED'] ?? '', namespace: ns, name: 'agp-raw-agent', failFast: true, inboxPrefix: `_INBOX.${ns}._agent.payment` });
    td.add(() => agent.close());
  });

  it('is created (or updated) through $JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter> with the documented configuration', async () => {
    const { steps, durable, filter } = js();
    const r = await request(`$JS.API.CONSUMER.CREATE.${steps}.${durable}.${filter}`, { stream_name: steps, config: config() });
    expect(r['error']).toBeUndefined();
    expect(r).toMatchObject({ stream_name: steps, name: durable, config: { filter_subject: filter, ack_policy: 'explicit', max_deliver: -1 } });
  });

  it("is refused through the legacy durable subject and the unfiltered one — a client library's default", async () => {
    const { steps, durable } = js();
    for (const subject of [`$JS.API.CONSUMER.DURABLE.CREATE.${steps}.${durable}`, `$JS.API.CONSUMER.CREATE.${steps}.${durable}`, `$JS.API.CONSUMER.CREATE.${steps}`]) {
      await expect(request(subject, { stream_name: steps, config: config() }), subject).rejects.toThrow(/Permissions Violation for Publish/);
    }
  });

  it('cannot be created for another agent type or another filter', async () => {
    const { steps } = js();
    const other = `$JS.API.CONSUMER.CREATE.${steps}.${agent.names.consumers.agent('fraud')}.${agent.names.subjects.step('fraud')}`;
    await expect(request(other, { stream_name: steps, config: { ...config(), durable_name: agent.names.consumers.agent('fraud'), filter_subject: agent.names.subjects.step('fraud') } })).rejects.toThrow(/Permissions Violation for Publish/);
    await waitFor(() => violations().some((l) => l.includes(other)), { timeoutMs: 5_000, what: 'the refusal in the server log' });
  });
});
