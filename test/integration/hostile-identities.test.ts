// Least privilege against a hostile client or agent (issue #28, decision 0022), on real servers configured
// from `triad auth init`'s own files: clients alice and bob (each in a NATS account of its own), one
// identity per agent type, the operator. Each attack of the issue is tried and refused: answers aimed at
// bob's inbox or at a stream, JetStream acknowledgements aimed there, consumers of any kind, bob's events,
// a forged dead letter's replay, Redis SELECT — and one client's flood does not hold another's order back.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, isBacklogFull, protocolHeaders, type Bus } from '@triad/bus';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { ordersWorkflow } from '@triad/example-orders';
import { encode, names, type DeadLetter, type Names, type StepRequest, type Submission } from '@triad/protocol';
import { keys } from '@triad/store';
import { uniqueNamespace, waitFor, withTeardown } from '../harness/index.js';
import { waitForDeadLetter } from '../support/dead-letters.js';
import { startSecured, type SecuredDeployment } from '../support/secured.js';
import { ROOT, SCRIPTS, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
const AGENTS = ['inventory', 'fraud', 'payment', 'shipping'];
/** Small, so the flood test reaches it quickly; the default is 1000. */
const BACKLOG = 20;
const ns = uniqueNamespace('hostile');
const n: Names = names(ns);
let secured: SecuredDeployment;
let t: TestTriad;
let alice: TriadClient;
let bob: TriadClient;
/** Bob's task that stays running: its one step waits for an agent type nobody serves. */
let bobsTask: string;

async function clientAs(identity: string, o: { backlogWaitMs?: number } = {}): Promise<TriadClient> {
  const c = await TriadClient.connect({ ...clientOptionsFromEnv(await secured.env(ns, identity)), requestTimeoutMs: 5_000, ...o });
  td.add(() => c.close());
  return c;
}

/** A bus on an identity of the namespace's own account, with its own inbox prefix. */
async function busAs(identity: string): Promise<Bus> {
  const env = await secured.env(ns, identity);
  const inbox = identity === 'operator' ? `_INBOX.${ns}.operator` : `_INBOX.${ns}._agent.${identity.slice('agent-'.length)}`;
  const b = await connectBus({ url: secured.nats.url, nkeySeed: env['NATS_NKEY_SEED'] ?? '', namespace: ns, name: `hostile-${identity}`, failFast: true, inboxPrefix: inbox });
  td.add(() => b.close());
  return b;
}

/** Every stream's last sequence: what was ever stored there. */
async function lastSeqs(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const s of Object.values(n.streams)) out[s] = (await t.client.bus.jsm.streams.info(s)).state.last_seq;
  return out;
}

/** Requests the schedulers answered per API endpoint, from their discovery stats (`$SRV.STATS`). */
async function answered(endpoint: string): Promise<number> {
  const m = await t.client.bus.nc.request(`$SRV.STATS.triad-${ns}`, new Uint8Array(), { timeout: 5_000 });
  const stats = m.json<{ endpoints: { name: string; num_requests: number }[] }>();
  return stats.endpoints.find((e) => e.name === endpoint)?.num_requests ?? 0;
}

/** Everything that arrives on a subject pattern, as seen by `bus`. */
function collect(bus: Bus, subject: string): string[] {
  const seen: string[] = [];
  bus.nc.subscribe(subject, {
    callback: (_e, m) => {
      seen.push(m.subject);
    },
  });
  return seen;
}

function cliAs(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, [SCRIPTS.cli, ...args], { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }),
  );
}

function schedulerHttpPort(): number {
  const m = /serving \/metrics, \/healthz and \/readyz on port (\d+)/.exec(t.schedulers[0]?.output() ?? '');
  if (!m?.[1]) throw new Error(`the scheduler did not say where it serves /metrics:\n${t.schedulers[0]?.output() ?? ''}`);
  return Number(m[1]);
}

beforeAll(async () => {
  secured = await startSecured(td, [{ namespace: ns, agents: AGENTS, clients: ['alice', 'bob'] }]);
  const [scheduler, supervisor, operator] = await Promise.all(['scheduler', 'supervisor', 'operator'].map((i) => secured.env(ns, i)));
  t = await startTriad(
    td,
    { nats: secured.nats, redis: { url: secured.adminRedisUrl } },
    {
      namespace: ns,
      agentProcesses: 0,
      registerOrders: false,
      env: { TRIAD_SUBMIT_BACKLOG_PER_CLIENT: String(BACKLOG) },
      roleEnv: { scheduler: { ...scheduler!, TRIAD_HTTP_PORT: '0', TRIAD_HTTP_HOST: '127.0.0.1' }, supervisor: supervisor!, client: operator! },
    },
  );
  await Promise.all(AGENTS.map(async (a) => t.startAgents({ ...(await secured.env(ns, `agent-${a}`)), ORDERS_AGENTS: a })));
  await t.client.registerWorkflow(ordersWorkflow);
  await t.client.registerWorkflow({ name: 'held', steps: [{ name: 'only', agent: 'ghost', budgetMs: 600_000 }] });
  [alice, bob] = await Promise.all([clientAs('client-alice'), clientAs('client-bob')]);
  ({ taskId: bobsTask } = await bob.submit('held', { secret: 'bob' }));
  // Started, and what its start published is stored (its step request, its events): from here on the
  // streams stay as they are unless something writes to them.
  await waitFor(
    async () => {
      const started = (await bob.taskEvents(bobsTask).catch(() => undefined))?.events.some((e) => e.type === 'step_started');
      const steps = (await t.client.bus.jsm.streams.info(n.streams.steps)).state.last_seq;
      return started && steps >= 1 ? true : undefined;
    },
    { timeoutMs: 15_000, what: "bob's held task to start, its step request and events stored" },
  );
}, 120_000);

describe('replies go only to the requester', () => {
  it("alice's requests answered onto bob's inbox or a stream's subject reach neither: the server routes every answer into her own account", async () => {
    const bobSaw = collect(bob.bus, `_INBOX.${ns}.bob.>`);
    const before = await lastSeqs();
    const [scoped, wide] = await Promise.all([answered('client_task_list'), answered('workflow_list')]);
    const targets = [`_INBOX.${ns}.bob.stolen`, n.subjects.event('bob', bobsTask), n.subjects.step('payment'), n.subjects.deadLetter('submit'), n.subjects.health, n.subjects.command, n.subjects.submit('bob')];
    for (const reply of targets) {
      alice.bus.nc.publish(n.subjects.clientApi('alice', 'task.list'), encode({ limit: 1 }), { reply, headers: protocolHeaders() });
      alice.bus.nc.publish(n.subjects.api('workflow.list'), encode({}), { reply, headers: protocolHeaders() });
    }
    await alice.bus.nc.flush();
    // The scheduler handled (and answered) every one of them …
    await waitFor(async () => ((await answered('client_task_list')) >= scoped + targets.length && (await answered('workflow_list')) >= wide + targets.length ? true : undefined), {
      timeoutMs: 15_000,
      what: "the scheduler to answer alice's requests",
    });
    // … and no answer reached bob or any stream (their subjects in alice's account hold nothing).
    await bob.bus.nc.flush();
    expect(bobSaw).toEqual([]);
    expect(await lastSeqs()).toEqual(before);
  });

  it("the scheduler neither runs nor answers a request whose reply subject is not its requester's inbox: it dead-letters and counts it", async () => {
    const operator = await busAs('operator');
    const bobSaw = collect(bob.bus, `_INBOX.${ns}.bob.>`);
    const steps = (await t.client.bus.jsm.streams.info(n.streams.steps)).state.last_seq;
    // From the namespace's own account (no import to rewrite the reply): a cancel of bob's task aimed at
    // the STEPS stream, and a read of alice's tasks aimed at bob's inbox.
    operator.nc.publish(n.subjects.api('task.cancel'), encode({ taskId: bobsTask, reason: 'hijacked' }), { reply: n.subjects.step('payment'), headers: protocolHeaders() });
    operator.nc.publish(n.subjects.clientApi('alice', 'task.list'), encode({ limit: 5 }), { reply: `_INBOX.${ns}.bob.stolen`, headers: protocolHeaders() });
    const toStream = await waitForDeadLetter(t.client.bus, (d) => d.source === 'api' && d.reason.includes(`reply subject "${n.subjects.step('payment')}"`), 'the cancel refused for its reply subject');
    expect(toStream.subject).toBe(n.subjects.api('task.cancel'));
    expect(toStream.reason).toMatch(/is not an inbox of namespace .*: not answered/);
    const toBob = await waitForDeadLetter(t.client.bus, (d) => d.source === 'api' && d.reason.includes(`_INBOX.${ns}.bob.stolen`), "alice's read refused for bob's inbox");
    expect(toBob.reason).toMatch(/is not client alice's inbox/);
    // allow_responses lets the scheduler answer any reply subject of a request it received — a JetStream
    // API subject too (a stream delete ignores its body): its own check is what keeps it to inboxes.
    operator.nc.publish(n.subjects.api('workflow.list'), encode({}), { reply: `$JS.API.STREAM.DELETE.${n.streams.events}`, headers: protocolHeaders() });
    await waitForDeadLetter(t.client.bus, (d) => d.source === 'api' && d.reason.includes('$JS.API.STREAM.DELETE'), 'the request answered onto a stream delete refused');
    await expect(t.client.bus.jsm.streams.info(n.streams.events)).resolves.toMatchObject({ config: { name: n.streams.events } });
    // Not run: bob's task still runs; not answered: nothing went to STEPS or to bob.
    expect((await t.client.getTask(bobsTask)).status).toBe('running');
    expect((await t.client.bus.jsm.streams.info(n.streams.steps)).state.last_seq).toBe(steps);
    await bob.bus.nc.flush();
    expect(bobSaw).toEqual([]);
    // Counted.
    const metrics = await (await fetch(`http://127.0.0.1:${schedulerHttpPort()}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`triad_api_requests_refused_total\\{namespace="${ns}",endpoint="task_cancel"\\} 1`));
    expect(metrics).toMatch(new RegExp(`triad_api_requests_refused_total\\{namespace="${ns}",endpoint="client_task_list"\\} 1`));
    expect(metrics).toMatch(new RegExp(`triad_api_requests_refused_total\\{namespace="${ns}",endpoint="workflow_list"\\} 1`));
  });

  it("alice's JetStream publishes with foreign reply subjects store nothing but her submissions: the acknowledgements stay in her account", async () => {
    const bobSaw = collect(bob.bus, `_INBOX.${ns}.bob.>`);
    const watched = [n.streams.commands, n.streams.results, n.streams.alerts, n.streams.deadLetters];
    const before = await lastSeqs();
    const ids = [`acks-${ns}-1`, `acks-${ns}-2`, `acks-${ns}-3`];
    const replies = [n.subjects.command, `_INBOX.${ns}.bob.steal`, n.subjects.result('payment')];
    ids.forEach((taskId, i) => {
      const sub: Submission = { taskId, workflow: 'held', input: {}, submittedAt: Date.now() };
      alice.bus.nc.publish(n.subjects.submit('alice'), encode(sub), { reply: replies[i], headers: protocolHeaders({ 'Nats-Msg-Id': `alice:${taskId}` }) });
    });
    // Stored and taken (the acknowledgement was sent when they were stored) …
    for (const id of ids) await waitFor(() => alice.getTask(id).catch(() => undefined), { timeoutMs: 15_000, what: `alice's task ${id}` });
    // … and none of those acknowledgements landed in a stream or with bob.
    const after = await lastSeqs();
    for (const s of watched) expect(after[s], s).toBe(before[s]);
    await bob.bus.nc.flush();
    expect(bobSaw).toEqual([]);
  });
});

describe('clients have no JetStream consumers to abuse', () => {
  it("alice may create no consumer — push or pull, on her events or anything else — nor read, delete or take over one of anyone's", async () => {
    const nc = alice.bus.nc;
    const events = n.streams.events;
    const push = JSON.stringify({ stream_name: events, config: { name: 'x', deliver_subject: n.subjects.command, filter_subject: n.subjects.event('alice', '*'), deliver_policy: 'all', ack_policy: 'none' } });
    for (const subject of [
      `$JS.API.CONSUMER.CREATE.${events}.x.${n.subjects.event('alice', '*')}`,
      `$JS.API.CONSUMER.CREATE.${events}`,
      `$JS.API.CONSUMER.DURABLE.CREATE.${events}.x`,
      `$JS.API.CONSUMER.INFO.${events}.x`,
      `$JS.API.CONSUMER.DELETE.${events}.x`,
      `$JS.API.CONSUMER.MSG.NEXT.${events}.x`,
      `$JS.API.STREAM.INFO.${events}`,
      `$JS.API.STREAM.MSG.GET.${events}`,
    ]) {
      await expect(nc.request(subject, push, { timeout: 5_000 }), subject).rejects.toThrow(/Permissions Violation for Publish/);
    }
    // The one JetStream request her identity may make says her account has none.
    const info = await nc.request('$JS.API.INFO', '', { timeout: 5_000 });
    expect(info.json<{ error?: { description?: string } }>().error?.description).toMatch(/jetstream not enabled/i);
  });

  it("alice reads none of bob's events, live or stored; her own come by subscription and task.events", async () => {
    const closed = await alice.bus.nc.subscribe(n.subjects.event('bob', '*')).closed;
    expect(closed instanceof Error ? closed.message : closed).toMatch(/Permissions Violation for Subscription to "triad\..*\.event\.bob\.\*"/);
    await expect(alice.bus.nc.request(n.subjects.clientApi('bob', 'task.events'), encode({ taskId: bobsTask }), { timeout: 5_000 })).rejects.toThrow(/Permissions Violation for Publish/);
    // Her own subject holds none of bob's task; bob's holds its history.
    await expect(alice.taskEvents(bobsTask)).resolves.toMatchObject({ events: [], more: false });
    // Naming bob as the owner changes nothing on her own subject.
    await expect(alice.taskEvents(bobsTask, { owner: 'bob' })).resolves.toMatchObject({ events: [], more: false });
    expect((await bob.taskEvents(bobsTask)).events.map((e) => e.type)).toContain('received');
    expect(alice.taskReads).toBe('own');
  });
});

describe('agents take only their own type\'s steps', () => {
  it("an agent may neither take another type's step request batches nor send any (decision 0023); its own batch durable it may use", async () => {
    const fraud = await busAs('agent-fraud');
    const steps = n.streams.steps;
    const body = (durable: string, filter: string): string => JSON.stringify({ stream_name: steps, config: { durable_name: durable, filter_subject: filter, ack_policy: 'explicit', deliver_policy: 'all', ack_wait: 5_000_000_000, max_deliver: -1 } });
    for (const [subject, payload] of [
      [`$JS.API.CONSUMER.CREATE.${steps}.${n.consumers.agentBatch('payment')}.${n.subjects.stepBatch('payment')}`, body(n.consumers.agentBatch('payment'), n.subjects.stepBatch('payment'))],
      [`$JS.API.CONSUMER.CREATE.${steps}.${n.consumers.agentBatch('fraud')}.${n.subjects.stepBatch('payment')}`, body(n.consumers.agentBatch('fraud'), n.subjects.stepBatch('payment'))],
      [`$JS.API.CONSUMER.MSG.NEXT.${steps}.${n.consumers.agentBatch('payment')}`, JSON.stringify({ batch: 1, expires: 1_000_000_000 })],
      [`$JS.API.CONSUMER.INFO.${steps}.${n.consumers.agentBatch('payment')}`, ''],
    ] as const) {
      await expect(fraud.nc.request(subject, payload, { timeout: 5_000 }), subject).rejects.toThrow(/Permissions Violation for Publish/);
    }
    // Forged batches, to another type or its own: only the scheduler role sends step requests.
    for (const agent of ['payment', 'fraud']) {
      await expect(fraud.js.publish(n.subjects.stepBatch(agent), encode({ requests: [new Uint8Array([1])] }), { timeout: 5_000 }), agent).rejects.toThrow(/Permissions Violation for Publish/);
    }
    // Its own batch durable (the agents of this namespace created it when they attached): info is allowed.
    const own = await fraud.nc.request(`$JS.API.CONSUMER.INFO.${steps}.${n.consumers.agentBatch('fraud')}`, '', { timeout: 5_000 });
    expect(own.json<{ name?: string; config?: { filter_subject?: string } }>()).toMatchObject({ name: n.consumers.agentBatch('fraud'), config: { filter_subject: n.subjects.stepBatch('fraud') } });
  });
});

describe('dead-letter replay', () => {
  it("a dead letter forged by an agent cannot make the operator's replay cancel or change a task", async () => {
    const fraud = await busAs('agent-fraud');
    const operatorEnv = await secured.env(ns, 'operator');
    const cancelBob = new Uint8Array(encode({ taskId: bobsTask, reason: 'forged' }));
    const forged = (o: Partial<DeadLetter>): Uint8Array =>
      encode({ source: 'step.fraud', reason: 'looks harmless', receivedAt: Date.now(), deliveries: 1, original: cancelBob, headers: { 'Triad-Protocol': '1', 'Nats-Rollup': 'all' }, ...o } satisfies DeadLetter);
    // The fraud agent may write only its own step dead letters.
    await expect(fraud.js.publish(n.subjects.deadLetter('submit'), forged({ source: 'submit' }))).rejects.toThrow(/Permissions Violation for Publish/);
    // A letter recording an API subject, and one whose body claims another source than its subject.
    const toApi = await fraud.js.publish(n.subjects.deadLetter('step_fraud'), forged({ subject: n.subjects.api('task.cancel') }));
    const otherSource = await fraud.js.publish(n.subjects.deadLetter('step_fraud'), forged({ source: 'command', subject: n.subjects.command }));
    expect((await t.client.deadLetter(toApi.seq)).replay).toEqual({ ok: false, reason: `it records subject ${n.subjects.api('task.cancel')}, which is not its source's (${n.subjects.step('fraud')}): forged or corrupt` });
    expect((await t.client.deadLetter(otherSource.seq)).replay).toMatchObject({ ok: false, reason: expect.stringMatching(/its body says source "command", but it was written on .*dlq\.step_fraud: forged or corrupt/) as unknown });
    for (const seq of [toApi.seq, otherSource.seq]) {
      const r = await cliAs(operatorEnv, ['dlq', 'replay', String(seq), '--yes']);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`dead letter ${seq} is not replayed`);
    }
    // One that is consistent (a step request on its own subject) replays only to step.fraud, is marked
    // as the fraud agent's word, and the operator's identity may not publish there anyway.
    const step: StepRequest = { taskId: bobsTask, workflow: 'held', version: 1, step: 'only', agent: 'fraud', kind: 'compensate', attempt: 1, idempotencyKey: 'x', completeBy: Date.now() + 60_000, needs: {}, dispatchedAt: Date.now() };
    const consistent = await fraud.js.publish(n.subjects.deadLetter('step_fraud'), forged({ subject: n.subjects.step('fraud'), original: new Uint8Array(encode(step)) }));
    const dl = await t.client.deadLetter(consistent.seq);
    expect(dl.replay).toEqual({ ok: true, subject: n.subjects.step('fraud'), stream: n.streams.steps, headers: { 'Triad-Protocol': '1' }, msgId: `triad-dlq-replay:${consistent.seq}` });
    expect(dl.writer.warning).toBe(`written on ${n.subjects.deadLetter('step_fraud')}, which agent "fraud" may publish, but that identity may not publish on ${n.subjects.step('fraud')}: its content is only agent "fraud"'s word`);
    const shown = await cliAs(operatorEnv, ['dlq', 'replay', String(consistent.seq), '--dry-run']);
    expect(shown.stdout).toContain(`warning: ${dl.writer.warning}`);
    const refused = await cliAs(operatorEnv, ['dlq', 'replay', String(consistent.seq), '--yes']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/not replayed: NATS refused to let this connection publish to "triad\..*\.step\.fraud".*only the scheduler role may/);
    // Bob's task is as it was.
    const bobNow = await t.client.getTask(bobsTask);
    expect(bobNow.status).toBe('running');
    expect(bobNow.steps[0]).toMatchObject({ status: 'processing', attempt: 1 });
  });
});

describe('Redis', () => {
  it('the scheduler and supervisor users cannot SELECT another database (nor their own: they need none)', async () => {
    for (const role of ['scheduler', 'supervisor']) {
      const r = new Redis((await secured.env(ns, role))['REDIS_URL'] ?? '', { lazyConnect: true, maxRetriesPerRequest: 0 });
      td.add(() => void r.disconnect());
      await r.connect();
      await expect(r.select(1), role).rejects.toThrow(/NOPERM/);
      await expect(r.select(0), role).rejects.toThrow(/NOPERM/);
      await expect(r.hgetall(keys(ns).workflow('orders')), role).resolves.toMatchObject({ latest: '1' });
    }
  });
});

describe('fair intake', () => {
  it("alice's flood fills only her own backlog; bob's order is taken and completes while hers still waits", async () => {
    const operatorEnv = await secured.env(ns, 'operator');
    // The operator holds alice to one submission every 100 s (stored in Redis, applied by every scheduler):
    // her backlog stays full for the whole test.
    const set = await cliAs(operatorEnv, ['intake', 'set', 'alice', '--rate', '0.01', '--burst', '1', '--json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ client: 'alice', ratePerSecond: 0.01, burst: 1 });
    expect(await t.client.intakeLimits()).toEqual([expect.objectContaining({ client: 'alice', ratePerSecond: 0.01, burst: 1 })]);
    expect(Object.keys(await t.redis.hgetall(keys(ns).intakeLimits))).toEqual(['alice']);
    // alice floods: JetStream stores her submissions until her backlog is full, then refuses hers only.
    let stored = 0;
    let refused = 0;
    const flood = async (from: number, count: number): Promise<void> => {
      for (let i = from; i < from + count; i++) {
        const sub: Submission = { taskId: `flood-${i}`, workflow: 'orders', input: { orderId: `flood-${i}`, amount: 1 }, submittedAt: Date.now() };
        try {
          await alice.bus.js.publish(n.subjects.submit('alice'), encode(sub), { msgID: `alice:${sub.taskId}`, headers: protocolHeaders() });
          stored++;
        } catch (e) {
          if (!isBacklogFull(e)) throw e;
          refused++;
        }
      }
    };
    await flood(0, 2 * BACKLOG);
    // Her burst of one is taken; the rest wait for their slots, 100 s apart. Refilled, her backlog is full.
    const takenFlood = async (): Promise<number> => (await alice.listTasks({ limit: 1_000 })).filter((x) => x.taskId.startsWith('flood-')).length;
    await waitFor(async () => ((await takenFlood()) >= 1 ? true : undefined), { timeoutMs: 30_000, what: "alice's first submission (her burst) to be taken" });
    await flood(2 * BACKLOG, BACKLOG);
    expect(refused).toBeGreaterThanOrEqual(BACKLOG);
    expect((await t.client.bus.jsm.streams.info(n.streams.submit, { subjects_filter: n.subjects.submit('alice') })).state.subjects).toEqual({ [n.subjects.submit('alice')]: BACKLOG });
    // The SDK waits while her backlog is full, then says why.
    const impatient = await clientAs('client-alice', { backlogWaitMs: 300 });
    await expect(impatient.submit('orders', { orderId: 'late', amount: 1 }, { taskId: 'flood-late' })).rejects.toThrow(
      /not stored: client alice already has as many submissions waiting .* \(TRIAD_SUBMIT_BACKLOG_PER_CLIENT\).*rate limit holds this client back \(triad limits\)/,
    );
    // bob is not behind her: his order is taken and completes while her backlog still waits.
    const order = await bob.run('orders', { orderId: 'bob-during-flood', amount: 5 }, { timeoutMs: 60_000 });
    expect(order.status).toBe('completed');
    expect(await takenFlood()).toBeLessThan(stored);
    expect(await t.client.clearIntakeLimit('alice')).toEqual({ client: 'alice', cleared: true });
  });
});
