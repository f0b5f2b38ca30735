// Least privilege (issue #11 items 4–6, decisions 0016 and 0022) on real servers configured from `triad auth
// init`'s own files: one nats-server and one Redis hold two namespaces' identities; the example runs end to
// end with every actor on its own identity, and every refusal of the role table is tried. The attacks of
// a hostile client or agent (issue #28) are in hostile-identities.test.ts.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, type Bus } from '@triad/bus';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { ordersWorkflow } from '@triad/example-orders';
import { StepResultSchema, encode, type ObjectRef, type StepResult } from '@triad/protocol';
import { connectRedis, keys } from '@triad/store';
import { uniqueNamespace, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { waitForDeadLetter } from '../support/dead-letters.js';
import { startSecured, type SecuredDeployment } from '../support/secured.js';
import { startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
const AGENTS = ['inventory', 'fraud', 'payment', 'shipping'];
const nsA = uniqueNamespace('lpa');
const nsB = uniqueNamespace('lpb');
let secured: SecuredDeployment;
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

/** The environment of one identity's .env file, pointed at the test's servers. */
function identityEnv(ns: string, name: string): Promise<Record<string, string>> {
  return secured.env(ns, name);
}

async function clientAs(ns: string, name: string, overrides: Record<string, string> = {}): Promise<TriadClient> {
  const c = await TriadClient.connect({ ...clientOptionsFromEnv({ ...(await identityEnv(ns, name)), ...overrides }), requestTimeoutMs: 5_000 });
  td.add(() => c.close());
  return c;
}

async function busAs(ns: string, name: string, namespace = ns): Promise<Bus> {
  const env = await identityEnv(ns, name);
  // The identity's own inbox (where its permissions let it receive replies), whatever namespace it tries.
  const inbox = name === 'operator' ? `_INBOX.${ns}.operator` : name.startsWith('agent-') ? `_INBOX.${ns}._agent.${name.slice(6)}` : `_INBOX.${ns}._${name}`;
  const b = await connectBus({ url: nats.url, nkeySeed: env['NATS_NKEY_SEED'] ?? '', namespace, name: `lp-${name}`, failFast: true, inboxPrefix: inbox });
  td.add(() => b.close());
  return b;
}

beforeAll(async () => {
  secured = await startSecured(td, [
    { namespace: nsA, agents: AGENTS, clients: ['web', 'mobile'] },
    { namespace: nsB, agents: AGENTS, clients: ['web'] },
  ]);
  ({ nats, redis } = secured);
  const [scheduler, supervisor, operator] = await Promise.all(['scheduler', 'supervisor', 'operator'].map((n) => identityEnv(nsA, n)));
  t = await startTriad(
    td,
    { nats, redis: { url: secured.adminRedisUrl } },
    { namespace: nsA, agentProcesses: 0, registerOrders: false, roleEnv: { scheduler: scheduler!, supervisor: supervisor!, client: operator! } },
  );
  await Promise.all(AGENTS.map(async (a) => t.startAgents({ ...(await identityEnv(nsA, `agent-${a}`)), ORDERS_AGENTS: a })));
  await t.client.registerWorkflow(ordersWorkflow);
}, 120_000);

describe('the example with every actor on its own identity', () => {
  it('completes orders submitted by a client identity, and Redis denied none of the actors’ commands', async () => {
    const web = await clientAs(nsA, 'client-web');
    const states = await Promise.all([1, 2].map((i) => web.run('orders', { orderId: `lp-${i}`, amount: 10 * i }, { timeoutMs: 60_000 })));
    for (const s of states) expect(s.status, s.taskId).toBe('completed');
    // ACL LOG lists every command or key Redis refused: the role's lists must cover what the actors do.
    expect(await t.redis.call('ACL', 'LOG')).toEqual([]);
  });

  it("a dispatch limit (decision 0020) under the actors' own identities: the scheduler's limits1 probe is allowed, orders complete through it, nothing denied", async () => {
    const violations = (): string[] => nats.log().split('\n').filter((l) => / - (Publish|Subscription) Violation - /.test(l) && l.includes('SRV'));
    // The operator sets it; the scheduler asks the schedulers' discovery ($SRV.INFO) first.
    const r = await t.client.setAgentLimit('payment', { concurrency: 1 });
    expect(r.limit).toMatchObject({ agent: 'payment', concurrency: 1 });
    try {
      await new Promise((res) => setTimeout(res, 1_300));
      const web = await clientAs(nsA, 'client-web');
      const states = await Promise.all([1, 2, 3].map((i) => web.run('orders', { orderId: `lp-lim-${i}`, amount: 10 * i }, { timeoutMs: 60_000 })));
      for (const s of states) expect(s.status, s.taskId).toBe('completed');
      expect(violations()).toEqual([]);
      expect(await t.redis.call('ACL', 'LOG')).toEqual([]);
    } finally {
      await t.client.clearAgentLimit('payment');
    }
  });

  it("a child task (decision 0019 §5) runs under the actors' own identities and is its parent's client's to read", async () => {
    await t.client.registerWorkflow({ name: 'lp-parent', steps: [{ name: 'order', child: { workflow: 'orders' } }] });
    const web = await clientAs(nsA, 'client-web');
    const done = await web.run('lp-parent', { orderId: 'lp-child', amount: 5 }, { timeoutMs: 60_000 });
    expect(done.status).toBe('completed');
    const child = await web.getTask(`${done.taskId}:order:1`);
    expect(child).toMatchObject({ status: 'completed', workflow: 'orders', client: done.client, parent: { taskId: done.taskId, step: 'order' } });
    expect(done.steps[0]?.output).toEqual(child.output);
    // The schedulers' startChild and the leader's notice scripts ran within their roles' commands.
    expect(await t.redis.call('ACL', 'LOG')).toEqual([]);
  });
});

describe('large payloads under auth init\'s identities (decision 0021 §4, 0022)', () => {
  it('a 20 MB order from a client identity completes through the payload broker with no permission violation; another client cannot read its objects', async () => {
    const violations = (): string[] => nats.log().split('\n').filter((l) => / - (Publish|Subscription) Violation - /.test(l));
    const before = violations().length;
    // Its own subjects from the start: the namespace-wide ones would be refused (and logged) first otherwise.
    const web = await TriadClient.connect({ ...clientOptionsFromEnv(await identityEnv(nsA, 'client-web')), requestTimeoutMs: 10_000, reads: 'own' });
    td.add(() => web.close());
    const document = 'd'.repeat(20_000_000);
    const state = await web.run('orders', { orderId: 'lp-big', amount: 5, document, labelBytes: 20_000_000 }, { timeoutMs: 180_000 });
    expect(state.status, JSON.stringify(state.steps.map((x) => [x.name, x.status, x.error]))).toBe('completed');
    expect(((state.steps.find((x) => x.name === 'ship')?.output ?? []) as { label?: string }[])[0]?.label?.length).toBe(20_000_000);
    expect(violations().slice(before)).toEqual([]);
    // mobile may not download web's objects: its scoped subject reaches its own bucket only.
    const raw = await web.getTask(state.taskId);
    const ref = raw.input as ObjectRef;
    const mobile = await TriadClient.connect({ ...clientOptionsFromEnv(await identityEnv(nsA, 'client-mobile')), requestTimeoutMs: 5_000, reads: 'own' });
    td.add(() => mobile.close());
    await expect(mobile.downloadBytes(ref)).rejects.toThrow(/is client web's, not this subject's client \("mobile"\)/);
    expect(await t.redis.call('ACL', 'LOG')).toEqual([]);
  }, 240_000);
});

describe('refusals', () => {
  it('no credentials: refused at connect with a message naming the settings', async () => {
    await expect(TriadClient.connect({ natsUrl: nats.url, namespace: nsA })).rejects.toThrow(
      /NATS at nats:\/\/127\.0\.0\.1:\d+ requires credentials and none were given .*: set NATS_CREDS, NATS_NKEY_SEED, NATS_USER and NATS_PASSWORD, or NATS_TOKEN/,
    );
  });

  it('a client cannot cancel, retry, register or list alerts, nor publish a result; it can read and submit', async () => {
    const web = await clientAs(nsA, 'client-web');
    const { taskId } = await web.submit('orders', { orderId: 'lp-refused', amount: 3 });
    // Stored in the stream is not yet received by a scheduler: read it once one has.
    await waitFor(() => web.getTask(taskId).catch(() => undefined), { timeoutMs: 30_000, what: `task ${taskId} to be recorded` });
    await expect(web.cancel(taskId)).rejects.toThrow(
      new RegExp(`NATS refused to let this connection publish to "triad\\.${nsA}\\.api\\.task\\.cancel": the credentials it connected with lack that permission .*only the operator role may`),
    );
    await expect(web.retry(taskId)).rejects.toThrow(/publish to "triad\..*\.api\.task\.retry".*only the operator role may/);
    await expect(web.registerWorkflow(ordersWorkflow)).rejects.toThrow(/api\.workflow\.register".*only the operator role may/);
    await expect(web.alerts()).rejects.toThrow(/api\.alert\.list".*only the operator role may/);
    await expect(web.bus.js.publish(web.bus.names.subjects.result('payment'), encode({}))).rejects.toThrow(/Permissions Violation for Publish to "triad\..*\.result\.payment"/);
    await web.wait(taskId, { timeoutMs: 60_000 });
  });

  it("a client reads only its own tasks: another client's are unknown to it and not listed; the operator sees both (decision 0017)", async () => {
    const [web, mobile] = await Promise.all([clientAs(nsA, 'client-web'), clientAs(nsA, 'client-mobile')]);
    const mine = await web.run('orders', { orderId: 'lp-web-secret', amount: 7 }, { timeoutMs: 60_000 });
    const theirs = await mobile.run('orders', { orderId: 'lp-mobile', amount: 8 }, { timeoutMs: 60_000 });
    // The SDK found the namespace-wide reads refused and reads on its own client-scoped subjects.
    await expect(web.getTask(mine.taskId)).resolves.toMatchObject({ taskId: mine.taskId, client: 'web', input: { orderId: 'lp-web-secret' } });
    expect(web.taskReads).toBe('own');
    await expect(mobile.getTask(mine.taskId)).rejects.toMatchObject({ code: 'UNKNOWN_TASK', message: `no task "${mine.taskId}": check the id (finished tasks are removed after their retention time)` });
    expect((await mobile.listTasks({ limit: 1000 })).map((x) => x.taskId)).toEqual([theirs.taskId]);
    expect((await web.listTasks({ limit: 1000 })).map((x) => x.taskId)).toContain(mine.taskId);
    expect((await web.listTasks({ limit: 1000 })).map((x) => x.taskId)).not.toContain(theirs.taskId);
    // NATS refuses a client the namespace-wide subjects and another client's scoped ones, whatever the SDK does.
    const raw = await clientAs(nsA, 'client-mobile');
    const strict = await TriadClient.connect({ ...clientOptionsFromEnv(await identityEnv(nsA, 'client-mobile')), reads: 'all', requestTimeoutMs: 5_000 });
    td.add(() => strict.close());
    await expect(strict.getTask(mine.taskId)).rejects.toThrow(
      new RegExp(`publish to "triad\\.${nsA}\\.api\\.task\\.get".*only the operator role may.*a client identity reads its own tasks on triad\\.${nsA}\\.api\\.client\\.<client>\\.task\\.get`),
    );
    await expect(raw.bus.nc.request(raw.bus.names.subjects.clientApi('web', 'task.get'), encode({ taskId: mine.taskId }), { timeout: 5_000 })).rejects.toThrow(
      /Permissions Violation for Publish to "triad\..*\.api\.client\.web\.task\.get"/,
    );
    // The operator (the test's client) reads every client's tasks.
    const operatorList = (await t.client.listTasks({ limit: 1000 })).map((x) => x.taskId);
    expect(operatorList).toEqual(expect.arrayContaining([mine.taskId, theirs.taskId]));
    expect(t.client.taskReads).toBe('all');
    await expect(t.client.getTask(theirs.taskId)).resolves.toMatchObject({ client: 'mobile' });
    // triad stuck of a client: on its own client-scoped subject (decision 0021 §3.7), of its own tasks.
    const fresh = await clientAs(nsA, 'client-web');
    await expect(fresh.stuckTasks({ client: 'mobile' })).rejects.toThrow(/client "mobile" is not this subject's client \("web"\)/);
    expect(fresh.taskReads).toBe('own');
    await expect(fresh.stuckTasks()).resolves.toMatchObject({ tasks: [], complete: true });
  });

  it('a client signals its own tasks only (decision 0019 §3.2); the operator signals any', async () => {
    await t.client.registerWorkflow({ name: 'lp-approval', steps: [{ name: 'approval', waitFor: { signal: 'approved', timeoutMs: 60_000 } }] });
    const [web, mobile] = await Promise.all([clientAs(nsA, 'client-web'), clientAs(nsA, 'client-mobile')]);
    const { taskId: own } = await web.submit('lp-approval', {});
    const { taskId: other } = await mobile.submit('lp-approval', {});
    await waitFor(async () => (await web.getTask(own).catch(() => undefined))?.steps[0]?.status === 'waiting', { timeoutMs: 20_000, what: "web's task to wait" });
    // Its own task: the SDK finds the namespace-wide subject refused and signals on its own scoped one.
    await expect(web.signal(own, 'approved', { by: 'web' }, { id: 'lp-sig-1' })).resolves.toMatchObject({ outcome: 'delivered', step: 'approval', signalId: 'lp-sig-1' });
    await expect(web.wait(own, { timeoutMs: 20_000 })).resolves.toMatchObject({ status: 'completed', steps: [expect.objectContaining({ output: { by: 'web' } })] });
    // Another client's task is unknown to it, exactly as a missing one.
    await expect(web.signal(other, 'approved', {}, { id: 'lp-sig-2' })).rejects.toMatchObject({ code: 'UNKNOWN_TASK' });
    expect((await t.client.getTask(other)).steps[0]?.status).toBe('waiting');
    // NATS itself refuses a client another client's signal subject and the namespace-wide one.
    await expect(web.bus.nc.request(web.bus.names.subjects.clientApi('mobile', 'task.signal'), encode({ taskId: other, name: 'approved', signalId: 'x' }), { timeout: 5_000 })).rejects.toThrow(
      /Permissions Violation for Publish to "triad\..*\.api\.client\.mobile\.task\.signal"/,
    );
    await expect(web.bus.nc.request(web.bus.names.subjects.api('task.signal'), encode({ taskId: other, name: 'approved', signalId: 'x' }), { timeout: 5_000 })).rejects.toThrow(
      /Permissions Violation for Publish to "triad\..*\.api\.task\.signal"/,
    );
    // The operator may signal any task.
    await expect(t.client.signal(other, 'approved', undefined, { id: 'lp-sig-3' })).resolves.toMatchObject({ outcome: 'delivered' });
    await expect(mobile.wait(other, { timeoutMs: 20_000 })).resolves.toMatchObject({ status: 'completed' });
  });

  it('schedules are the operator\'s (decision 0019 §6): a client is refused every schedule operation; the supervisor submits a schedule\'s tasks in its client\'s name', async () => {
    const web = await clientAs(nsA, 'client-web');
    await expect(web.createSchedule('lp-beat', { workflow: 'lp-nap', every: '1s' })).rejects.toThrow(/publish to "triad\..*\.api\.schedule\.create".*only the operator role may/);
    await expect(web.listSchedules()).rejects.toThrow(/publish to "triad\..*\.api\.schedule\.list".*only the operator role may/);
    await expect(web.pauseSchedule('lp-beat')).rejects.toThrow(/publish to "triad\..*\.api\.schedule\.pause".*only the operator role may/);
    await expect(web.deleteSchedule('lp-beat')).rejects.toThrow(/publish to "triad\..*\.api\.schedule\.delete".*only the operator role may/);
    // The operator schedules tasks of client web: the secured supervisor publishes them on submit.web, and web reads them.
    await t.client.registerWorkflow({ name: 'lp-nap', steps: [{ name: 'rest', sleep: { ms: 10 } }] });
    // Overlap skip (the default): the supervisor reads the last task's status and the outbox too.
    await t.client.createSchedule('lp-beat', { workflow: 'lp-nap', every: '1s', client: 'web' });
    await waitFor(async () => ((await t.client.getSchedule('lp-beat')).fired >= 2 ? true : undefined), { timeoutMs: 30_000, what: 'two ticks fired' });
    const fired = await waitFor(async () => (await t.client.getSchedule('lp-beat')).lastTaskId, { timeoutMs: 30_000, what: 'a tick fired' });
    await t.client.pauseSchedule('lp-beat');
    const state = await waitFor(() => web.getTask(fired).catch(() => undefined), { timeoutMs: 30_000, what: `task ${fired} to be recorded, readable by web` });
    expect(state).toMatchObject({ taskId: fired, client: 'web', workflow: 'lp-nap' });
    await expect(web.wait(fired, { timeoutMs: 30_000 })).resolves.toMatchObject({ status: 'completed' });
    await t.client.deleteSchedule('lp-beat');
    // Redis refused none of the scheduler's and supervisor's schedule commands.
    expect(await t.redis.call('ACL', 'LOG')).toEqual([]);
  });

  it('the operator asks which agent instance holds an attempt, and the one holding it answers under its own identity (decision 0021 §3.3)', async () => {
    await t.client.registerWorkflow({ name: 'lp-probe', steps: [{ name: 'hold', agent: 'inventory', budgetMs: 60_000 }] });
    t.services.inventory.setFaults({ hangRate: 1 });
    try {
      const { taskId } = await t.client.submit('lp-probe', { orderId: 'lp-probe', amount: 1 });
      await waitFor(() => (t.services.inventory.waiting().some((w) => w.idempotencyKey.includes(taskId)) ? true : undefined), { timeoutMs: 30_000, what: 'the call to be held' });
      const [held, none] = await t.client.probe([
        { agent: 'inventory', taskId, step: 'hold', kind: 'run', attempt: 1 },
        { agent: 'inventory', taskId, step: 'hold', kind: 'run', attempt: 2 },
      ]);
      expect(held).toMatchObject({ taskId, step: 'hold', attempt: 1, agentId: expect.stringMatching(/^agent-/) as unknown, try: 1 });
      expect(none).toBeNull();
      await t.client.cancel(taskId);
    } finally {
      t.services.inventory.setFaults({ hangRate: 0 });
    }
  });

  it("an agent cannot publish another agent type's result, read its steps, nor use Redis", async () => {
    const payment = await busAs(nsA, 'agent-payment');
    await expect(payment.js.publish(payment.names.subjects.result('shipping'), encode({}))).rejects.toThrow(/Permissions Violation for Publish to "triad\..*\.result\.shipping"/);
    await expect(payment.jsm.consumers.info(payment.names.streams.steps, 'agent-shipping')).rejects.toThrow(/Permissions Violation/);
    const env = await identityEnv(nsA, 'agent-payment');
    expect(env['REDIS_URL']).toBeUndefined();
    // No Redis user exists for it; the default user is off.
    await expect(connectRedis({ url: `redis://127.0.0.1:${redis.port}` })).rejects.toThrow(/Redis at redis:\/\/127\.0\.0\.1:\d+ requires a password|refused the credentials/);
  });

  it('a result forged by an agent for a step of another agent type is rejected, counted and dead-lettered', async () => {
    await t.client.registerWorkflow({ name: 'held', steps: [{ name: 'only', agent: 'ghost', budgetMs: 60_000 }] });
    const { taskId } = await t.client.submit('held', {});
    await waitFor(async () => ((await t.client.getTask(taskId)).steps[0]?.status === 'processing' ? true : undefined), { timeoutMs: 15_000, what: 'the ghost step to start' });
    const result: StepResult = { taskId, step: 'only', kind: 'run', attempt: 1, agentId: 'impostor', finishedAt: Date.now(), tries: 1, ok: true, output: { stolen: true } };
    expect(StepResultSchema.safeParse(result).success).toBe(true);
    // The payment agent's identity may publish on its own result subject only.
    const payment = await busAs(nsA, 'agent-payment');
    await payment.js.publish(payment.names.subjects.result('payment'), encode(result), { msgID: `forged-${taskId}` });
    const dl = await waitForDeadLetter(t.client.bus, (d) => d.reason.startsWith('forged result rejected'), 'the forged result dead-lettered');
    expect(dl.reason).toMatch(/agent ghost's, but the result came on agent payment's subject/);
    expect(await t.redis.hget(keys(nsA).task(taskId), 'forgedResults')).toBe('1');
    expect((await t.client.getTask(taskId)).steps[0]?.status).toBe('processing');
    await t.client.cancel(taskId, 'test over');
  });

  it("a replyTo outside the submitting client's inbox is refused with the reason", async () => {
    const web = await clientAs(nsA, 'client-web');
    await expect(
      web.submit('orders', { orderId: 'lp-relay', amount: 1 }, { taskId: `relay-${nsA}`, replyTo: `_INBOX.${nsA}.operator.stolen` }).then(() => web.wait(`relay-${nsA}`, { timeoutMs: 15_000 })),
    ).rejects.toThrow(/replyTo ".*" is not in client web's inbox; use a subject starting with _INBOX\./);
  });

  it("one namespace's identities cannot reach the other's subjects, streams or Redis keys", async () => {
    // B's client pointed at A: its inbox and A's API are not its own.
    await expect(clientAs(nsB, 'client-web', { TRIAD_NAMESPACE: nsA }).then((c) => c.listTasks())).rejects.toThrow(/NATS refused to let this connection/);
    // B's operator cannot read A's streams; B's scheduler cannot pull A's submissions; B's agent cannot take A's steps.
    const bOperator = await busAs(nsB, 'operator', nsA);
    await expect(bOperator.jsm.streams.info(bOperator.names.streams.events)).rejects.toThrow(/Permissions Violation/);
    const bScheduler = await busAs(nsB, 'scheduler', nsA);
    await expect(bScheduler.jsm.consumers.info(bScheduler.names.streams.submit, 'scheduler')).rejects.toThrow(/Permissions Violation/);
    const bAgent = await busAs(nsB, 'agent-payment', nsA);
    await expect(bAgent.jsm.consumers.info(bAgent.names.streams.steps, 'agent-payment')).rejects.toThrow(/Permissions Violation/);
    // Redis: B's scheduler user sees none of A's keys, and may not list keys at all.
    const bRedisUrl = (await identityEnv(nsB, 'scheduler'))['REDIS_URL'] ?? '';
    const r = new Redis(bRedisUrl, { lazyConnect: true, maxRetriesPerRequest: 0 });
    td.add(() => void r.disconnect());
    await r.connect();
    await expect(r.hgetall(keys(nsA).workflow('orders'))).rejects.toThrow(/NOPERM/);
    await expect(r.keys('*')).rejects.toThrow(/NOPERM/);
    await expect(r.hgetall(keys(nsB).workflow('none'))).resolves.toEqual({});
  });
});
