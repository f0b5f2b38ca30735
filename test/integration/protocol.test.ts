// Protocol v1 on real processes (docs/protocol.md): every message carries Triad-Protocol 1; a message of
// another major version is dead-lettered with that reason; a submission that cannot be read is still
// answered on its reply subject (Triad-Reply-To header) and in its task's event stream (Nats-Msg-Id); a
// step request with a field this agent does not know still runs; the API is a NATS service with discovery.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headers } from '@nats-io/nats-core';
import { PROTOCOL_HEADER, REPLY_TO_HEADER, protocolHeaders } from '@triad/bus';
import { TriadClient } from '@triad/client';
import { ApiReplySchema, ErrorCode, decode, encode, isTriadError, type StepRequest } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { waitForDeadLetter } from '../support/dead-letters.js';
import { startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis });
});

async function deadLetterWith(text: string): Promise<{ source: string; reason: string }> {
  return waitForDeadLetter(t.client.bus, (d) => d.reason.includes(text), `a dead letter whose reason contains "${text}"`);
}

describe('versions', () => {
  it('every message Triad publishes says Triad-Protocol 1', async () => {
    const state = await t.client.run('orders', { orderId: 'v-1', amount: 1 }, { timeoutMs: 30_000 });
    const bus = t.client.bus;
    const m = await bus.jsm.streams.getMessage(bus.names.streams.events, { last_by_subj: bus.names.subjects.event(t.client.clientId, state.taskId) });
    expect(m?.header.get(PROTOCOL_HEADER)).toBe('1');
  });

  it('a message of another major version is dead-lettered with that reason; the consumer goes on', async () => {
    const bus = t.client.bus;
    const h = headers();
    h.set(PROTOCOL_HEADER, '2');
    await bus.js.publish(bus.names.subjects.submit(t.client.clientId), encode({ taskId: 'v2-1', workflow: 'orders', input: {}, submittedAt: Date.now() }), { headers: h, msgID: 'v2-1' });
    const dl = await deadLetterWith('Triad protocol "2"');
    expect(dl.source).toBe('submit');
    expect(dl.reason).toMatch(/it speaks protocol 1/);
    expect((await t.client.run('orders', { orderId: 'after-v2', amount: 1 }, { timeoutMs: 30_000 })).status).toBe('completed');
  });
});

describe('priority (decision 0020: stored and shown, no scheduling effect yet)', () => {
  it('a priority other than 3 is stored and read back; 3 and none read as absent; anything else is refused with the reason', async () => {
    const high = await t.client.run('orders', { orderId: 'prio-1', amount: 1 }, { timeoutMs: 30_000, priority: 1 });
    expect(high.status).toBe('completed');
    expect((await t.client.getTask(high.taskId)).priority).toBe(1);
    const plain = await t.client.run('orders', { orderId: 'prio-3', amount: 1 }, { timeoutMs: 30_000, priority: 3 });
    expect((await t.client.getTask(plain.taskId)).priority).toBeUndefined();
    // The SDK refuses it before sending; a raw submission is refused by the scheduler with the same words.
    await expect(t.client.submit('orders', { orderId: 'prio-0', amount: 1 }, { priority: 0 })).rejects.toThrow(/priority: expected a whole number from 1 \(highest\) to 5 \(lowest\), got 0/);
    const bus = t.client.bus;
    await bus.js.publish(bus.names.subjects.submit(t.client.clientId), encode({ taskId: 'prio-9', workflow: 'orders', input: {}, submittedAt: Date.now(), priority: 9 }), { headers: protocolHeaders(), msgID: `${t.client.clientId}:prio-9` });
    await expect(t.client.wait('prio-9', { timeoutMs: 10_000 })).rejects.toThrow(/priority: expected a whole number from 1 \(highest\) to 5 \(lowest\), got 9/);
  });
});

describe('clear answers for every bad submission', () => {
  it('a body that is not msgpack is answered on the Triad-Reply-To subject and in the task event stream, so wait() ends with the reason', async () => {
    const bus = t.client.bus;
    const reply = t.client.replySubject();
    const garbage = new Uint8Array([0xc1, 0xc1, 0xc1]);
    await bus.js.publish(bus.names.subjects.submit(t.client.clientId), garbage, { headers: protocolHeaders({ [REPLY_TO_HEADER]: reply.subject }), msgID: `${t.client.clientId}:garbled-1` });
    const first = await reply.events[Symbol.asyncIterator]().next();
    reply.close();
    expect(first.value).toMatchObject({ taskId: 'garbled-1', type: 'rejected' });
    expect(first.value?.reason).toMatch(/not valid msgpack/);
    await expect(t.client.wait('garbled-1', { timeoutMs: 10_000 })).rejects.toThrow(/submission is not valid msgpack/);
  });

  it('a submission with an unknown extension type is refused with the reason, not dropped', async () => {
    const bus = t.client.bus;
    const reply = t.client.replySubject();
    // The map of a valid submission with one more entry, input: an ext 8 value of type 0x55 (no reader knows it).
    const map = encode({ taskId: 'ext-1', workflow: 'orders', submittedAt: Date.now() });
    expect(map[0]).toBe(0x83);
    const withExt = Buffer.concat([Buffer.from([0x84]), Buffer.from(map).subarray(1), Buffer.from(encode('input')), Buffer.from([0xd7, 0x55, 0, 0, 0, 0, 0, 0, 0, 1])]);
    await bus.js.publish(bus.names.subjects.submit(t.client.clientId), withExt, { headers: protocolHeaders({ [REPLY_TO_HEADER]: reply.subject }), msgID: `${t.client.clientId}:ext-1` });
    const first = await reply.events[Symbol.asyncIterator]().next();
    reply.close();
    expect(first.value).toMatchObject({ taskId: 'ext-1', type: 'rejected' });
    expect(first.value?.reason).toMatch(/not valid msgpack \(.*[Ee]xtension/);
  });

  it('a valid submission followed by trailing bytes is refused, and the refusal carries its task id (read from the body: no Nats-Msg-Id)', async () => {
    const bus = t.client.bus;
    const reply = t.client.replySubject();
    const body = encode({ taskId: 'trailing-1', workflow: 'orders', input: {}, submittedAt: Date.now(), replyTo: reply.subject });
    await bus.js.publish(bus.names.subjects.submit(t.client.clientId), Buffer.concat([Buffer.from(body), Buffer.from([0xc0])]), { headers: protocolHeaders() });
    const first = await reply.events[Symbol.asyncIterator]().next();
    reply.close();
    expect(first.value).toMatchObject({ taskId: 'trailing-1', type: 'rejected', seq: 0 });
    expect(first.value?.reason).toMatch(/not valid msgpack \(Data read, but end of buffer not reached/);
  });

  it('a readable submission whose task id is not a valid one is refused under the id as submitted, not "unknown"', async () => {
    const bus = t.client.bus;
    const reply = t.client.replySubject();
    await bus.js.publish(bus.names.subjects.submit(t.client.clientId), encode({ taskId: 'order 7.a', workflow: 'orders', input: {}, submittedAt: Date.now(), replyTo: reply.subject }), { headers: protocolHeaders() });
    const first = await reply.events[Symbol.asyncIterator]().next();
    reply.close();
    expect(first.value).toMatchObject({ taskId: 'order 7.a', type: 'rejected', seq: 0 });
    expect(first.value?.error?.code).toBe(ErrorCode.InvalidMessage);
    expect(first.value?.reason).toMatch(/taskId: a task id is 1-128 letters/);
  });
});

describe('an older reader gets a newer message', () => {
  it('a step request with a field this agent does not know still runs', async () => {
    await t.client.registerWorkflow({ name: 'newer', steps: [{ name: 'only', agent: 'inventory', budgetMs: 120_000 }] });
    // The first call takes 2 s, so the step is still running when the newer request arrives.
    t.services.inventory.setFaults({ latencyMs: 2_000 });
    const { taskId } = await t.client.submit('newer', { orderId: 'newer-1', amount: 1 });
    await waitFor(async () => ((await t.client.getTask(taskId)).steps[0]?.status === 'processing' ? true : undefined), { timeoutMs: 15_000, what: 'the step to start' });
    // The scheduler sent attempt 1; a newer scheduler would add fields. Send attempt 1 again with one
    // (JetStream dedup is by message id, so use a new one): the agent runs it, the effect is applied once.
    const task = await t.client.getTask(taskId);
    const step = task.steps[0]!;
    const req: StepRequest & { priority: string } = {
      taskId,
      workflow: 'newer',
      version: task.version,
      step: 'only',
      agent: 'inventory',
      kind: 'run',
      attempt: 1,
      idempotencyKey: `${t.namespace}/${taskId}/only`,
      completeBy: step.completeBy!,
      input: { orderId: 'newer-1', amount: 1 },
      needs: {},
      dispatchedAt: Date.now(),
      priority: 'high',
    };
    t.services.inventory.setFaults({ latencyMs: 0 });
    await t.client.bus.js.publish(t.client.bus.names.subjects.step('inventory'), encode(req), { headers: protocolHeaders(), msgID: `newer-${taskId}` });
    const done = await t.client.wait(taskId, { timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    // Both requests ran (two calls reached the service), and the effect was applied once.
    const effects = t.services.inventory.effects().filter((e) => e.idempotencyKey === req.idempotencyKey);
    expect(effects).toHaveLength(1);
    await waitFor(() => (t.services.inventory.effects().find((e) => e.idempotencyKey === req.idempotencyKey)?.calls === 2 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the newer request to have been run too (a second call for the key)',
    });
  });
});

describe('the API is a NATS service', () => {
  it('answers $SRV.PING, INFO and STATS like the service framework, listing every operation and counting requests', async () => {
    const nc = t.client.bus.nc;
    const name = `triad-${t.namespace}`;
    const json = (b: Uint8Array): Record<string, unknown> => JSON.parse(new TextDecoder().decode(b)) as Record<string, unknown>;
    const ping = json((await nc.request(`$SRV.PING.${name}`, new Uint8Array(), { timeout: 5_000 })).data);
    // features: the step features of decision 0019 this scheduler runs (every kind is built since increment 7),
    // and `limits1`: it runs dispatch limits (decision 0020's probe, which agentLimit.set reads before storing one).
    expect(ping).toMatchObject({ type: 'io.nats.micro.v1.ping_response', name, version: '1.0.0', metadata: { namespace: t.namespace, protocol: '1', features: 'when,sleep,waitFor,forEach,child,limits1' } });
    const info = json((await nc.request(`$SRV.INFO.${name}.${String(ping['id'])}`, new Uint8Array(), { timeout: 5_000 })).data);
    expect(info['type']).toBe('io.nats.micro.v1.info_response');
    expect((info['endpoints'] as { name: string; subject: string }[]).find((e) => e.name === 'task_get')).toMatchObject({ subject: t.client.bus.names.subjects.api('task.get') });
    expect((info['endpoints'] as { name: string; subject: string }[]).find((e) => e.name === 'client_task_get')).toMatchObject({ subject: `triad.${t.namespace}.api.client.*.task.get` });
    await t.client.listWorkflows();
    const stats = await waitFor(
      async () => {
        const s = json((await nc.request(`$SRV.STATS.${name}.${String(ping['id'])}`, new Uint8Array(), { timeout: 5_000 })).data);
        const list = (s['endpoints'] as { name: string; num_requests: number }[]).find((e) => e.name === 'workflow_list');
        return list && list.num_requests > 0 ? s : undefined;
      },
      { timeoutMs: 10_000, what: 'the scheduler to count a workflow.list request' },
    );
    expect(stats['type']).toBe('io.nats.micro.v1.stats_response');
  });
});

describe('client-scoped task reads (decision 0017)', () => {
  async function clientNamed(clientId: string): Promise<TriadClient> {
    const c = await TriadClient.connect({ natsUrl: nats.url, namespace: t.namespace, clientId, reads: 'own', requestTimeoutMs: 5_000 });
    td.add(() => c.close());
    return c;
  }

  /** The error a read answered with, its task id replaced, to compare two answers. */
  async function errorOf(p: Promise<unknown>, taskId: string): Promise<{ code: string; message: string }> {
    const e = await p.then(
      () => undefined,
      (x: unknown) => x,
    );
    if (!isTriadError(e)) throw new Error(`expected a TriadError, got ${String(e)}`);
    return { code: e.code, message: e.message.replaceAll(taskId, '<id>') };
  }

  it("a client reads and lists only its own tasks; another's answers exactly like a missing one; the namespace-wide read sees all", async () => {
    const [alice, bob] = await Promise.all([clientNamed('alice'), clientNamed('bob')]);
    const a = await alice.run('orders', { orderId: 'scoped-a', amount: 1 }, { timeoutMs: 30_000 });
    const b = await bob.run('orders', { orderId: 'scoped-b', amount: 2 }, { timeoutMs: 30_000 });
    expect(alice.taskReads).toBe('own');
    expect(await alice.getTask(a.taskId)).toMatchObject({ taskId: a.taskId, client: 'alice', input: { orderId: 'scoped-a' } });
    const foreign = await errorOf(bob.getTask(a.taskId), a.taskId);
    const missing = await errorOf(bob.getTask('no-such-task'), 'no-such-task');
    expect(foreign).toEqual(missing);
    expect(foreign.code).toBe(ErrorCode.UnknownTask);
    const [aliceList, bobList, all] = await Promise.all([alice.listTasks(), bob.listTasks(), t.client.listTasks()]);
    expect(aliceList.map((x) => x.taskId)).toEqual([a.taskId]);
    expect(bobList.map((x) => x.taskId)).toEqual([b.taskId]);
    expect(all.map((x) => x.taskId)).toEqual(expect.arrayContaining([a.taskId, b.taskId]));
    // Unsecured, the SDK's default keeps reading the namespace's tasks (NATS refuses nothing).
    expect(t.client.taskReads).toBe('all');
    expect(await t.client.getTask(a.taskId)).toMatchObject({ client: 'alice' });
  });

  it('only task.get and task.list exist under a client; anything else there is an unknown operation', async () => {
    const nc = t.client.bus.nc;
    for (const subject of [`triad.${t.namespace}.api.client.alice.task.cancel`, `triad.${t.namespace}.api.client.1bad.task.get`, `triad.${t.namespace}.api.client.alice`]) {
      const raw = await nc.request(subject, encode({ taskId: 'x' }), { timeout: 5_000, headers: protocolHeaders() });
      const reply = decode(raw.data, ApiReplySchema, 'reply');
      expect(reply.ok && !reply.value.ok ? reply.value.error : undefined, subject).toMatchObject({ code: ErrorCode.InvalidMessage, message: expect.stringContaining('unknown API operation') });
    }
  });
});
