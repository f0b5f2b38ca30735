// Conditions (decision 0019 §2.4 R1, increment 3) on a real redis-server: a step whose `when` is false when
// it becomes ready is skipped with the reason, its dependents run, a skipped step is never compensated,
// readiness repeats within one transition (a JSON plan need not be in dependency order), a condition that
// cannot be read fails its step at start with an alert, a retry with a corrected input re-evaluates it,
// and compaction keeps the reason.
import { describe, expect, it } from 'vitest';
import { encode, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-conditions-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
const ns = (): string => `c${process.pid}-${++nsCounter}`;
const T0 = 1_700_000_000_000;
const EPOCH = 1;

function plan(def: WorkflowDefinitionInput): PlanStep[] {
  return compilePlan(validateDefinition(def));
}

function create(store: TaskStore, taskId: string, p: PlanStep[], input: Uint8Array, onFailure: 'error' | 'compensate' = 'error') {
  return store.createTask({ lease: HELD, taskId, workflow: 'w', version: 1, input, plan: p, onFailure, client: 'client-1', now: T0, schedulerId: 'sched-1' });
}

function ok(taskId: string, step: string, agent: string, attempt: number, now: number, output: unknown, kind: 'run' | 'compensate' = 'run') {
  return { lease: HELD, taskId, step, kind, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: agent, outcome: { ok: true as const, output: encode(output) } };
}

async function created(store: TaskStore, taskId: string, p: PlanStep[], input: Uint8Array, onFailure: 'error' | 'compensate' = 'error') {
  const out = await create(store, taskId, p, input, onFailure);
  if (!out.created) throw new Error('expected a new task');
  return out.transition;
}

async function steps(store: TaskStore, taskId: string) {
  const t = await store.getTask(taskId);
  return Object.fromEntries((t?.steps ?? []).map((s) => [s.name, { status: s.status, ...(s.reason ? { reason: s.reason } : {}) }]));
}

/** a → approval (when amount > 1000) → ship; ship needs approval's output. */
const approvalPlan = plan({
  name: 'w',
  steps: [
    { name: 'a', agent: 'inventory' },
    { name: 'approval', agent: 'review', dependsOn: ['a'], when: { input: 'amount', gt: 1000 } },
    { name: 'ship', agent: 'shipping', dependsOn: ['approval'], needs: ['approval'] },
  ],
});

describe('conditions (when)', () => {
  it('skips a step whose condition is false, with the reason, and runs its dependents (which get no output of it)', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 't1', approvalPlan, encode({ amount: 10 }));
    const t = await store.applyResult(ok('t1', 'a', 'inventory', 1, T0 + 5, { reserved: true }));
    if (!t.applied) throw new Error('expected applied');
    expect(t.transition.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['step_done', 'a', undefined],
      ['step_skipped', 'approval', 'amount 10 is not > 1000'],
      ['step_started', 'ship', undefined],
    ]);
    expect(t.transition.dispatch).toEqual([expect.objectContaining({ step: 'ship', agent: 'shipping', needs: ['approval'] })]);
    // The skipped step has no output: the request's need is empty.
    expect(t.transition.outputs.get('approval')?.length ?? 0).toBe(0);
    expect(await steps(store, 't1')).toEqual({ a: { status: 'processed' }, approval: { status: 'skipped', reason: 'amount 10 is not > 1000' }, ship: { status: 'processing' } });
    const state = await store.getTask('t1');
    expect(state?.steps.find((s) => s.name === 'approval')).toMatchObject({ attempt: 0, finishedAt: T0 + 5, effect: 'none' });

    const done = await store.applyResult(ok('t1', 'ship', 'shipping', 1, T0 + 9, { shipped: true }));
    if (!done.applied) throw new Error('expected applied');
    expect(done.transition.status).toBe('completed');
  });

  it('runs the step when its condition holds', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 't2', approvalPlan, encode({ amount: 1500 }));
    const t = await store.applyResult(ok('t2', 'a', 'inventory', 1, T0 + 5, {}));
    if (!t.applied) throw new Error('expected applied');
    expect(t.transition.dispatch.map((d) => d.step)).toEqual(['approval']);
    expect(t.transition.events.map((e) => e.type)).toEqual(['step_done', 'step_started']);
  });

  it("evaluates a condition on a step's output", async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({
      name: 'w',
      steps: [
        { name: 'quote', agent: 'pricing' },
        { name: 'review', agent: 'review', dependsOn: ['quote'], when: { output: 'quote.total', gte: 100 } },
      ],
    });
    await created(store, 'q1', p, encode({}));
    const t = await store.applyResult(ok('q1', 'quote', 'pricing', 1, T0 + 5, { total: 99.5 }));
    if (!t.applied) throw new Error('expected applied');
    // Every step is done (processed or skipped): the task completes in the same transition.
    expect(t.transition.status).toBe('completed');
    expect(t.transition.events.map((e) => [e.type, e.reason])).toEqual([
      ['step_done', undefined],
      ['step_skipped', 'quote.total 99.5 is not >= 100'],
      ['completed', undefined],
    ]);
  });

  it('repeats readiness within one transition: a skip makes a step earlier in the plan ready (a JSON plan need not be in dependency order)', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({
      name: 'w',
      steps: [
        { name: 'late', agent: 'x', dependsOn: ['gate'] },
        { name: 'gate', agent: 'y', when: { input: 'vip', eq: true } },
      ],
    });
    const t = await created(store, 'o1', p, encode({ vip: false }));
    expect(t.events.map((e) => [e.type, e.step])).toEqual([
      ['received', undefined],
      ['step_skipped', 'gate'],
      ['step_started', 'late'],
    ]);
    expect(t.dispatch.map((d) => d.step)).toEqual(['late']);
  });

  it('completes a task whose every step is skipped at creation, and files it for retention', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'only', agent: 'x', when: { input: 'go', exists: true } }] });
    const t = await created(store, 'all-skip', p, encode({}));
    expect(t.status).toBe('completed');
    expect(t.dispatch).toEqual([]);
    expect(t.events.map((e) => [e.type, e.reason])).toEqual([
      ['received', undefined],
      ['step_skipped', 'go is absent'],
      ['completed', undefined],
    ]);
    expect([...(await indexMap(r(), store, 'finished')).keys()]).toEqual(['all-skip']);
    expect(await indexMap(r(), store, 'deadlines')).toEqual(new Map());
  });

  it('never compensates a skipped step: the undo compensates only the steps that ran', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({
      name: 'w',
      onFailure: 'compensate',
      steps: [
        { name: 'a', agent: 'inventory', compensate: { agent: 'inventory-undo' } },
        { name: 'b', agent: 'payment', dependsOn: ['a'], when: { input: 'pay', eq: true }, compensate: { agent: 'payment-undo' } },
        { name: 'c', agent: 'shipping', dependsOn: ['b'] },
      ],
    });
    await created(store, 'u1', p, encode({ pay: false }), 'compensate');
    await store.applyResult(ok('u1', 'a', 'inventory', 1, T0 + 5, {}));
    const failed = await store.applyResult({ ...ok('u1', 'c', 'shipping', 1, T0 + 9, {}), outcome: { ok: false as const, message: 'no such address', retryable: false, effect: 'none' as const } });
    if (!failed.applied) throw new Error('expected applied');
    expect(failed.transition.dispatch).toEqual([expect.objectContaining({ step: 'a', agent: 'inventory-undo', kind: 'compensate' })]);
    const undone = await store.applyResult(ok('u1', 'a', 'inventory-undo', 1, T0 + 12, {}, 'compensate'));
    if (!undone.applied) throw new Error('expected applied');
    expect(undone.transition.status).toBe('compensated');
    expect(await steps(store, 'u1')).toEqual({ a: { status: 'compensated' }, b: { status: 'skipped', reason: 'pay false is not true' }, c: { status: 'failed' } });
  });

  it('fails a step whose condition cannot be read (an input that is not msgpack) at its start: the task fails with an alert; a retry with a corrected input skips it and completes the task', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'gate', agent: 'x', when: { input: 'amount', gt: 1 } }] });
    // A map of one key whose value is cut short: the bytes end inside the value at amount.
    const broken = Buffer.from([0x81, 0xa6, ...Buffer.from('amount'), 0xcb, 0x40]);
    const t = await created(store, 'bad1', p, broken);
    expect(t.status).toBe('failed');
    const why = 'the task input is not valid msgpack at amount (the bytes end inside a value)';
    expect(t.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['received', undefined, undefined],
      ['step_failed', 'gate', why],
      ['failed', undefined, `step gate failed: its condition could not be evaluated: ${why}`],
    ]);
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'bad1:gate:step_failed:start-1', kind: 'step_failed', taskId: 'bad1', step: 'gate', lastError: why })]);
    expect((await store.pendingAlerts(10)).map((a) => a.alert.id)).toEqual(['bad1:gate:step_failed:start-1']);

    const retried = await store.retryStep({ lease: HELD, taskId: 'bad1', step: 'gate', input: encode({ amount: 0 }), now: T0 + 50, schedulerId: 'sched-1' });
    expect(retried.status).toBe('completed');
    expect(retried.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['step_skipped', 'gate', 'amount 0 is not > 1'],
      ['completed', undefined, undefined],
    ]);
    expect(await store.openAlerts()).toEqual([]);
    expect(await steps(store, 'bad1')).toEqual({ gate: { status: 'skipped', reason: 'amount 0 is not > 1' } });
  });

  it('a retry whose condition still cannot be read fails the step again, and its new alert stands', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'gate', agent: 'x', when: { input: 'amount', gt: 1 } }] });
    const broken = Buffer.from([0x81, 0xa6, ...Buffer.from('amount'), 0xc1]);
    await created(store, 'bad2', p, broken);
    const retried = await store.retryStep({ lease: HELD, taskId: 'bad2', step: 'gate', now: T0 + 50, schedulerId: 'sched-1' });
    expect(retried.status).toBe('failed');
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'bad2:gate:step_failed:start-2', lastError: 'the task input is not valid msgpack at amount (byte 0xc1 starts no msgpack value)' })]);
    expect((await store.getTask('bad2'))?.status).toBe('failed');
    // Each failure at the start is its own alert (JetStream would drop a repeated id as a duplicate).
    expect((await store.pendingAlerts(10)).map((a) => a.alert.id)).toEqual(['bad2:gate:step_failed:start-1', 'bad2:gate:step_failed:start-2']);
  });

  it('keeps a skipped step and its reason through compaction', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'k1', approvalPlan, encode({ amount: 3 }));
    await store.applyResult(ok('k1', 'a', 'inventory', 1, T0 + 5, {}));
    await store.applyResult(ok('k1', 'ship', 'shipping', 1, T0 + 9, {}));
    const before = await steps(store, 'k1');
    expect(await store.compactFinished(T0 + 100, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    expect(await r().hget(store.keys.task('k1'), 'c')).toBe('1');
    expect(await steps(store, 'k1')).toEqual(before);
    expect(before.approval).toEqual({ status: 'skipped', reason: 'amount 3 is not > 1000' });
  });
});
