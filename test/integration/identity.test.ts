// Decision 0010 on real processes: subjects carry the submitter and the agent type, and the scheduler
// holds senders to them — a reply only goes to the submitter's own inbox, a result only counts from the
// step's own agent type, a task id belongs to the client that used it first — and agents speak only NATS.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TriadClient } from '@triad/client';
import { StepResultSchema, encode, type StepResult } from '@triad/protocol';
import { keys } from '@triad/store';
import { freePort, startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
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

async function deadLetter(match: (reason: string) => boolean, what: string): Promise<string> {
  return (await waitForDeadLetter(t.client.bus, (d) => match(d.reason), what)).reason;
}

async function otherClient(clientId: string): Promise<TriadClient> {
  const c = await TriadClient.connect({ natsUrl: nats.url, namespace: t.namespace, clientId });
  td.add(() => c.close());
  return c;
}

describe('who may be answered, and who may report', () => {
  it("records the submitting client on the task and publishes its events under it; another client's replyTo is refused with the reason", async () => {
    const shop = await otherClient('shop-1');
    const state = await shop.run('orders', { orderId: 'id-1', amount: 3 }, { timeoutMs: 30_000 });
    expect(state).toMatchObject({ status: 'completed', client: 'shop-1' });
    // Its events are under triad.<ns>.event.shop-1.<taskId>.
    const info = await shop.bus.jsm.streams.info(shop.bus.names.streams.events, { subjects_filter: shop.bus.names.subjects.event('shop-1', state.taskId) });
    expect(Object.keys(info.state.subjects ?? {})).toEqual([shop.bus.names.subjects.event('shop-1', state.taskId)]);

    // A replyTo in someone else's inbox (or anywhere else) is never published to.
    const victim = t.client.replySubject();
    const got: unknown[] = [];
    void (async () => {
      for await (const e of victim.events) got.push(e);
    })();
    await expect(shop.submit('orders', { orderId: 'id-2', amount: 1 }, { taskId: 'relay-1', replyTo: victim.subject }).then(() => shop.wait('relay-1', { timeoutMs: 15_000 }))).rejects.toThrow(
      /replyTo ".*" is not in client shop-1's inbox; use a subject starting with _INBOX\./,
    );
    expect(await deadLetter((r) => r.includes('relay-1') && r.includes('not in client shop-1'), 'the relayed submission dead-lettered')).toMatch(/replyTo/);
    victim.close();
    expect(got, JSON.stringify(got)).toEqual([]);
  });

  it('a task id belongs to the client that used it first: another client is refused, never merged', async () => {
    const a = await otherClient('client-a');
    const b = await otherClient('client-b');
    const first = await a.run('orders', { orderId: 'taken-1', amount: 2 }, { taskId: 'shared-id-1', timeoutMs: 30_000 });
    expect(first.client).toBe('client-a');
    await b.submit('orders', { orderId: 'taken-2', amount: 9 }, { taskId: 'shared-id-1' });
    await expect(b.wait('shared-id-1', { timeoutMs: 15_000 })).rejects.toThrow(/the task id is taken by another client/);
    expect((await a.getTask('shared-id-1')).input).toEqual({ orderId: 'taken-1', amount: 2 });
  });

  it("a result on another agent type's subject is forged: rejected, counted and dead-lettered; the step's own agent's result still counts", async () => {
    await t.client.registerWorkflow({ name: 'held', steps: [{ name: 'only', agent: 'ghost', budgetMs: 60_000 }] });
    const { taskId } = await t.client.submit('held', {});
    await waitFor(async () => ((await t.client.getTask(taskId)).steps[0]?.status === 'processing' ? true : undefined), { timeoutMs: 15_000, what: 'the ghost step to start' });
    const result: StepResult = { taskId, step: 'only', kind: 'run', attempt: 1, agentId: 'impostor', finishedAt: Date.now(), tries: 1, ok: true, output: { stolen: true } };
    expect(StepResultSchema.safeParse(result).success).toBe(true);
    // payment's agent is allowed payment's result subject only: it cannot speak for ghost's step.
    await t.client.bus.js.publish(t.client.bus.names.subjects.result('payment'), encode(result), { msgID: `forged-${taskId}` });
    expect(await deadLetter((r) => r.startsWith('forged result rejected') && r.includes('step only'), 'the forged result dead-lettered')).toMatch(
      /agent ghost's, but the result came on agent payment's subject/,
    );
    expect(await t.redis.hget(keys(t.namespace).task(taskId), 'forgedResults')).toBe('1');
    expect((await t.client.getTask(taskId)).steps[0]?.status).toBe('processing');
    await t.client.bus.js.publish(t.client.bus.names.subjects.result('ghost'), encode({ ...result, agentId: 'ghost-1' }), { msgID: `real-${taskId}` });
    const done = await t.client.wait(taskId, { timeoutMs: 15_000 });
    expect(done.steps[0]).toMatchObject({ status: 'processed', lockedBy: 'ghost-1', output: { stolen: true } });
  });
});

describe('agents speak only NATS', () => {
  it('an agent host whose REDIS_URL points where nothing listens still completes the orders', async () => {
    const nowhere = `redis://127.0.0.1:${await freePort()}`;
    const u = await startTriad(td, { nats, redis }, { agentProcesses: 0 });
    await u.startAgents({ REDIS_URL: nowhere });
    const states = await Promise.all(Array.from({ length: 3 }, (_, i) => u.client.run('orders', { orderId: `no-redis-${i}`, amount: i + 1 }, { timeoutMs: 30_000 })));
    for (const s of states) expect(s.status).toBe('completed');
    // Which agent ran each step is known from its result (a fan-out step — ship — is run by its elements, each its own agent).
    expect(states.flatMap((s) => s.steps.filter((x) => x.agent && x.items === undefined).map((x) => x.lockedBy))).not.toContain(undefined);
  });
});
