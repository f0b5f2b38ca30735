// Decision 0009 on a real redis-server: every step phase climbs a bounded ladder (breaker refusals count
// past maxCircuitOpen, a give-up time caps it), the task deadline, alerts recorded by the transitions,
// and the supervisor's no-op that writes nothing.
import { describe, expect, it } from 'vitest';
import { encode, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { Leases, TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-liveness-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
function ns(): string {
  nsCounter++;
  return `l${process.pid}-${nsCounter}`;
}

const T0 = 1_700_000_000_000;
const input = encode({ orderId: 'o-1' });

function plan(def: WorkflowDefinitionInput): PlanStep[] {
  return compilePlan(validateDefinition(def));
}

function create(store: TaskStore, taskId: string, p: PlanStep[], o: { onFailure?: 'error' | 'compensate'; deadlineMs?: number; now?: number } = {}) {
  return store.createTask({
    lease: HELD,
    taskId,
    workflow: 'w',
    version: 1,
    input,
    plan: p,
    onFailure: o.onFailure ?? 'error',
    ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}),
    client: 'client-1',
    now: o.now ?? T0,
    schedulerId: 'sched-1',
  });
}

function ok(taskId: string, step: string, attempt: number, now: number) {
  return { lease: HELD, taskId, step, kind: 'run' as const, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: 'x', outcome: { ok: true as const, output: encode({ step }) } };
}

function circuitOpen(taskId: string, step: string, attempt: number, now: number, retryAfterMs: number) {
  return {
    lease: HELD,
    taskId,
    step,
    kind: 'run' as const,
    attempt,
    now,
    schedulerId: 'sched-1',
    agentId: 'agent-1',
    agentType: 'x',
    outcome: { ok: false as const, message: 'the circuit breaker is open; the step was not attempted', retryable: true, circuitOpenRetryAfterMs: retryAfterMs, effect: 'none' as const },
  };
}

async function stepOf(store: TaskStore, taskId: string, step: string) {
  const s = (await store.getTask(taskId))?.steps.find((x) => x.name === step);
  if (!s) throw new Error(`no step ${step} in ${taskId}`);
  return s;
}

async function deadlines(store: TaskStore): Promise<Record<string, number>> {
  return Object.fromEntries(await indexMap(r(), store, 'deadlines'));
}

describe('a breaker that stays open still ends the step', () => {
  // budget 100, r=1, L=1000, m=2, c=2.
  const p = plan({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 100, ladder: { retries: 1, longBackoffMs: 1_000, maxFailures: 2, maxCircuitOpen: 2 } }] });

  it('parks refusals until the breaker half-opens without counting, up to maxCircuitOpen; then counts them, and gives up', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'cb-1', p);
    // Refusal 1: parked until the breaker half-opens; no failure counted.
    let res = await store.applyResult(circuitOpen('cb-1', 'a', 1, T0 + 10, 1_000));
    expect(res.applied).toBe(true);
    expect(await stepOf(store, 'cb-1', 'a')).toMatchObject({ status: 'parked', failureCount: 0, circuitCount: 1, completeBy: T0 + 1_010 });
    expect((await store.expireStep('cb-1', 'a', T0 + 1_010, 1)).action).toBe('retry');
    // Refusal 2: still within maxCircuitOpen.
    await store.applyResult(circuitOpen('cb-1', 'a', 2, T0 + 1_020, 500));
    expect(await stepOf(store, 'cb-1', 'a')).toMatchObject({ status: 'parked', failureCount: 0, circuitCount: 2, completeBy: T0 + 1_520 });
    expect((await store.expireStep('cb-1', 'a', T0 + 1_520, 1)).action).toBe('retry');
    // Refusal 3 is past the limit: a reported failure, which the supervisor counts.
    res = await store.applyResult(circuitOpen('cb-1', 'a', 3, T0 + 1_530, 500));
    if (!res.applied) throw new Error(res.reason);
    expect(res.transition.events[0]?.reason).toMatch(/over maxCircuitOpen 2/);
    expect(await stepOf(store, 'cb-1', 'a')).toMatchObject({ status: 'processing', circuitCount: 3, completeBy: T0 + 1_530 });
    const e1 = await store.expireStep('cb-1', 'a', T0 + 1_530, 1);
    expect(e1).toMatchObject({ action: 'retry', failureCount: 1, attempt: 4 });
    // Refusal 4 counts too: failure 2 = maxFailures → error, the task fails with an alert.
    await store.applyResult(circuitOpen('cb-1', 'a', 4, T0 + 1_540, 500));
    const e2 = await store.expireStep('cb-1', 'a', T0 + 1_540, 1);
    expect(e2).toMatchObject({ action: 'error', failureCount: 2 });
    expect((await store.getTask('cb-1'))?.status).toBe('failed');
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'cb-1:a:step_error:4', kind: 'step_error', step: 'a' })]);
    expect(await deadlines(store)).toEqual({});
  });
});

describe('the give-up time', () => {
  it('is set on the first start and caps parks; a park that reaches it ends in a give-up', async () => {
    // Ladder alone would allow many parks; giveUpAfterMs 2500 cuts it.
    const p = plan({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 100, giveUpAfterMs: 2_500, ladder: { retries: 0, longBackoffMs: 1_000, maxFailures: 50, maxCircuitOpen: 50 } }] });
    const store = new TaskStore(r(), ns());
    await create(store, 'gu-1', p);
    expect(await stepOf(store, 'gu-1', 'a')).toMatchObject({ giveUpAt: T0 + 2_500 });
    // Failure 1 (> retries 0): park until T0 + 1100.
    expect(await store.expireStep('gu-1', 'a', T0 + 100, 1)).toMatchObject({ action: 'park' });
    expect(await store.expireStep('gu-1', 'a', T0 + 1_100, 1)).toMatchObject({ action: 'retry', attempt: 2 });
    // A breaker refusal near the give-up time parks only until giveUpAt …
    await store.applyResult(circuitOpen('gu-1', 'a', 2, T0 + 2_000, 5_000));
    expect(await stepOf(store, 'gu-1', 'a')).toMatchObject({ status: 'parked', completeBy: T0 + 2_500 });
    // … where the park's end gives up instead of retrying.
    const e = await store.expireStep('gu-1', 'a', T0 + 2_500, 1);
    expect(e.action).toBe('error');
    expect((await store.getTask('gu-1'))?.error).toMatch(/step a gave up at its give-up time after 1 failures/);
  });

  it('gives up at once when the long back-off could not end before it', async () => {
    const p = plan({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 100, giveUpAfterMs: 1_500, ladder: { retries: 0, longBackoffMs: 1_000, maxFailures: 50 } }] });
    const store = new TaskStore(r(), ns());
    await create(store, 'gu-2', p);
    expect(await store.expireStep('gu-2', 'a', T0 + 100, 1)).toMatchObject({ action: 'park' }); // until T0 + 1100 < 1500
    expect(await store.expireStep('gu-2', 'a', T0 + 1_100, 1)).toMatchObject({ action: 'retry' });
    // Failure 2 at T0 + 1200: a park until T0 + 2200 would pass the give-up time.
    const e = await store.expireStep('gu-2', 'a', T0 + 1_200, 1);
    expect(e).toMatchObject({ action: 'error', failureCount: 2 });
    expect((await store.getTask('gu-2'))?.error).toMatch(/no time for another attempt before its give-up time/);
  });
});

describe('the task deadline', () => {
  const p = plan({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 10_000, compensate: { agent: 'x', budgetMs: 100 } }, { name: 'b', agent: 'x', budgetMs: 10_000, dependsOn: ['a'] }] });

  it('is indexed with the task; a finished task drops it', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'dl-1', p, { deadlineMs: 5_000 });
    expect(await deadlines(store)).toEqual({ 'dl-1|a': T0 + 10_000, 'dl-1|#task': T0 + 5_000 });
    expect((await store.getTask('dl-1'))?.deadlineAt).toBe(T0 + 5_000);
    // Before it: a noop that moves nothing.
    expect((await store.expireTask('dl-1', T0 + 4_999, 1)).action).toBe('noop');
    await store.applyResult(ok('dl-1', 'a', 1, T0 + 10));
    await store.applyResult(ok('dl-1', 'b', 1, T0 + 20));
    expect((await store.getTask('dl-1'))?.status).toBe('completed');
    expect(await deadlines(store)).toEqual({});
  });

  it('with onFailure error: the steps in flight are abandoned, the task fails with a task_deadline alert', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'dl-2', p, { deadlineMs: 5_000 });
    await store.applyResult(ok('dl-2', 'a', 1, T0 + 10));
    const x = await store.expireTask('dl-2', T0 + 5_000, 1);
    expect(x.action).toBe('error');
    expect(x.events.map((e) => [e.type, e.step])).toEqual([
      ['step_abandoned', 'b'],
      ['failed', undefined],
    ]);
    const t = await store.getTask('dl-2');
    expect(t?.status).toBe('failed');
    expect(t?.error).toMatch(/the task deadline passed \(5000 ms after it was accepted\)/);
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'dl-2:#task:task_deadline:0', kind: 'task_deadline', taskId: 'dl-2' })]);
    expect(await deadlines(store)).toEqual({});
  });

  it("an operator's retry lifts it and restarts the abandoned steps", async () => {
    const namespace = ns();
    const store = new TaskStore(r(), namespace);
    await create(store, 'dl-3', p, { deadlineMs: 5_000 });
    await store.applyResult(ok('dl-3', 'a', 1, T0 + 10));
    await store.expireTask('dl-3', T0 + 5_000, 1);
    const lease = new Leases(r(), namespace).task('dl-3');
    const t = await store.retryStep({ lease, taskId: 'dl-3', step: 'b', now: T0 + 6_000, schedulerId: 'sched-1' });
    expect(t.status).toBe('running');
    expect(t.dispatch).toEqual([expect.objectContaining({ step: 'b', attempt: 2 })]);
    expect(t.events.map((e) => e.type)).toEqual(['step_retried']);
    expect(await deadlines(store)).toEqual({ 'dl-3|b': T0 + 16_000 });
    expect(await store.openAlerts()).toEqual([]);
    expect((await store.getTask('dl-3'))?.deadlineAt).toBeUndefined();
  });
});

describe('the supervisor writes nothing on a no-op and never moves time backwards', () => {
  it('a no-op expiry leaves the record untouched; a late sweep clock is clamped to the task time', async () => {
    const p = plan({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 1_000 }, { name: 'b', agent: 'x', budgetMs: 1_000, dependsOn: ['a'] }] });
    const store = new TaskStore(r(), ns());
    await create(store, 'clk-1', p);
    const before = await r().hgetall(store.keys.task('clk-1'));
    expect((await store.expireStep('clk-1', 'a', T0 + 500, 1)).action).toBe('noop');
    expect(await r().hgetall(store.keys.task('clk-1'))).toEqual(before);
    // a completes at T0 + 2000 (its agent's clock), b starts then; a supervisor whose clock says T0 + 1500
    // finds b's deadline passed only after it: clamp to the task's time, never earlier.
    await store.applyResult(ok('clk-1', 'a', 1, T0 + 2_000));
    await r().zadd(store.keys.forTask('clk-1').deadlines, T0 + 1_000, 'clk-1|b');
    await r().hset(store.keys.task('clk-1'), 's:b', JSON.stringify({ ...JSON.parse((await r().hget(store.keys.task('clk-1'), 's:b')) ?? '{}'), completeBy: T0 + 1_000 }));
    const e = await store.expireStep('clk-1', 'b', T0 + 1_500, 1);
    expect(e.action).toBe('retry');
    const t = await store.getTask('clk-1');
    expect(t?.updatedAt).toBe(T0 + 2_000);
    expect(t?.steps[1]?.startedAt).toBe(T0 + 2_000);
  });
});
