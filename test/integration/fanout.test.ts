// Fan-out on real processes (decision 0019, increment 6): a `forEach` step runs its agent once per element
// of a list, at most maxParallel at once, each element with its own idempotency key
// (`<ns>/<task>/<step>/<i>`); the step's output is the list of the element outputs in index order. An
// agent killed (SIGKILL) mid-element: the supervisor retries that element, and each key is applied once.
// An element that fails for good undoes the task: each element that took effect is compensated.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskState, WorkflowDefinitionInput } from '@triad/protocol';
import { keys } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const undo = { agent: 'worker', budgetMs: 3_000 };
const fanning: WorkflowDefinitionInput = {
  name: 'fanning',
  onFailure: 'compensate',
  defaults: { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 5, longBackoffMs: 300, maxFailures: 8 } },
  steps: [
    { name: 'reserve', agent: 'worker', budgetMs: 3_000, compensate: undo },
    { name: 'ship', agent: 'worker', budgetMs: 3_000, dependsOn: ['reserve'], forEach: 'items', maxParallel: 2, maxItems: 10, compensate: undo },
    { name: 'notify', agent: 'worker', budgetMs: 3_000, dependsOn: ['ship'], needs: ['ship'] },
  ],
};

const supervisor = { intervalMs: 200, leaseMs: 1_500 };

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor });
  await t.startSagaAgents();
  await t.client.registerWorkflow(fanning);
});

const stepOf = (s: TaskState, name: string) => s.steps.find((x) => x.name === name)!;
const elementKey = (taskId: string, i: number): string => `${t.namespace}/${taskId}/ship/${i}`;
/** The ledger's effects of a task's `ship` step, by idempotency key. */
const shipEffects = (taskId: string) => t.ledger.effects().filter((e) => e.idempotencyKey.startsWith(`${t.namespace}/${taskId}/ship`));

describe('fan-out', () => {
  it('calls the agent once per element, and the step output is the element outputs in index order', async () => {
    const items = [{ sku: 'a' }, { sku: 'b' }, 'c', 4, { sku: 'e', qty: 2 }];
    const { taskId } = await t.client.submit('fanning', { items });
    const done = await t.client.wait(taskId, { timeoutMs: 40_000 });
    expect(done.status).toBe('completed');
    const ship = stepOf(done, 'ship');
    expect(ship.status).toBe('processed');
    const output = ship.output as { index: number; value: unknown }[];
    expect(output.map((o) => [o.index, o.value])).toEqual(items.map((v, i) => [i, v]));
    // One call and one effect per element, under each element's own key (and none under the step's).
    const effects = shipEffects(taskId);
    expect(effects.map((e) => e.idempotencyKey).sort()).toEqual(items.map((_, i) => elementKey(taskId, i)).sort());
    for (const e of effects) expect(e).toMatchObject({ applied: true, calls: 1, undone: false });
    expect(effects.map((e) => e.payload)).toEqual(expect.arrayContaining(items));
    // The next step received the array.
    expect(t.ledger.effects().filter((e) => e.idempotencyKey === `${t.namespace}/${taskId}/notify`)).toHaveLength(1);
    expect(ship.items).toEqual({ count: 5, pending: 0, running: 0, done: 5, failed: 0 });
  });

  it('triad status shows a fan-out step\'s elements while they run (decision 0019 §7)', async () => {
    // The first two elements take a while (within a wider budget): two run (maxParallel 2), three wait.
    await t.client.registerWorkflow({ ...fanning, name: 'fanning-slowly', steps: fanning.steps.map((x) => ({ ...x, budgetMs: 20_000 })) });
    const { taskId } = await t.client.submit('fanning-slowly', { items: ['a', 'b', 'c', 'd', 'e'], delayMs: { 'ship#0': 6_000, 'ship#1': 6_000 } });
    const running = await waitFor(async () => {
      const s = stepOf(await t.client.getTask(taskId), 'ship');
      return s.items?.running === 2 ? s : undefined;
    }, { timeoutMs: 20_000, what: 'two elements to run' });
    expect(running.items).toEqual({ count: 5, pending: 3, running: 2, done: 0, failed: 0 });
    const status = await cli(t, ['status', taskId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^ship\s+worker\s+processing\s.*elements 2 running, 3 pending of 5$/m);
    expect((await t.client.wait(taskId, { timeoutMs: 40_000 })).status).toBe('completed');
  });

  it('an agent killed (SIGKILL) mid-element: the element is retried, and every element key is applied exactly once', async () => {
    // The ledger holds each call 1.5 s before applying it: the agent is surely mid-call when killed.
    t.ledger.setFaults({ latencyMs: 1_500 });
    const items = ['x0', 'x1', 'x2'];
    const { taskId } = await t.client.submit('fanning', { items });
    await waitFor(() => t.ledger.waiting().some((c) => c.idempotencyKey === elementKey(taskId, 1)) || undefined, { timeoutMs: 20_000, what: 'element 1 to be mid-call' });
    await t.agents[0]!.kill('SIGKILL');
    t.agents.length = 0;
    t.ledger.setFaults({ latencyMs: 0 });
    await t.startSagaAgents();
    const done = await t.client.wait(taskId, { timeoutMs: 60_000 });
    expect(done.status).toBe('completed');
    expect((stepOf(done, 'ship').output as { value: unknown }[]).map((o) => o.value)).toEqual(items);
    const effects = shipEffects(taskId);
    // Exactly one applied effect per element key (a retried element's second call is the same key: a duplicate).
    expect(effects.map((e) => e.idempotencyKey).sort()).toEqual(items.map((_, i) => elementKey(taskId, i)));
    for (const e of effects) expect(e).toMatchObject({ applied: true, tombstone: false, undone: false, reversals: 0 });
    // The killed element was run again: its record (`s:ship#1`, decision 0019 §2.2) has a later attempt.
    const element = JSON.parse((await t.redis.hget(keys(t.namespace).task(taskId), 's:ship#1')) ?? '{}') as { attempt?: number; status?: string };
    expect(element.status).toBe('processed');
    expect(element.attempt).toBeGreaterThanOrEqual(2);
  });

  it('an element that fails for good undoes the task: every element that took effect is compensated, then the step before', async () => {
    const items = ['u0', 'u1', 'u2', 'u3'];
    const { taskId } = await t.client.submit('fanning', { items, failAt: 'ship#3', delayMs: { 'ship#2': 300 } });
    const end = await t.client.wait(taskId, { timeoutMs: 60_000 });
    expect(end.status).toBe('compensated');
    expect(end.error).toMatch(/^step ship element 3 failed permanently: ship#3 refused/);
    expect(stepOf(end, 'ship').status).toBe('compensated');
    const effects = new Map(t.ledger.effects().map((e) => [e.idempotencyKey, e]));
    // Elements 0–2 were applied and are undone once each; element 3 never reached the ledger (refused
    // before applying, effect none): it is not compensated, so it leaves no tombstone either.
    for (const i of [0, 1, 2]) expect(effects.get(elementKey(taskId, i))).toMatchObject({ applied: true, undone: true, reversals: 1 });
    expect(effects.has(elementKey(taskId, 3))).toBe(false);
    const reserve = effects.get(`${t.namespace}/${taskId}/reserve`);
    expect(reserve).toMatchObject({ undone: true, reversals: 1 });
    // Compensations run in reverse: the step before the fan-out is undone after every element.
    for (const i of [0, 1, 2]) expect(Date.parse(reserve!.undoneAt!)).toBeGreaterThanOrEqual(Date.parse(effects.get(elementKey(taskId, i))!.undoneAt!));
  });

  it('a list above maxItems fails the step at its start with the reason, and the task is undone', async () => {
    const end = await t.client.run('fanning', { items: Array.from({ length: 11 }, (_, i) => i) }, { timeoutMs: 40_000 });
    expect(end.status).toBe('compensated');
    expect(stepOf(end, 'ship')).toMatchObject({ status: 'failed', error: 'forEach: items has 11 elements, above maxItems 10' });
    expect(shipEffects(end.taskId)).toEqual([]);
  });
});
