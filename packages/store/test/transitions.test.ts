// Proves the Redis transitions on a real redis-server: readiness, attempt fencing, the failure ladder, epoch fencing, the deadline index, task leases and workflow versions (leadership: leadership.test.ts).
import { describe, expect, it } from 'vitest';
import { ErrorCode, TriadError, encode, isTriadError, unpackTrusted, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { Leadership, Leases, TaskStore, WorkflowStore, isLeaseBusy } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const r = usePrivateRedis('triad-store-test', (redis) => redis.set(HELD.key, HELD.token));

// ---------------------------------------------------------------------------------------------
// Fixtures.

let nsCounter = 0;
/** A fresh namespace per test: no test sees another's keys. */
function ns(): string {
  nsCounter++;
  return `t${process.pid}-${nsCounter}`;
}

const T0 = 1_700_000_000_000;

function plan(def: WorkflowDefinitionInput): PlanStep[] {
  return compilePlan(validateDefinition(def));
}

/** a → (b, c) → d, with distinct budgets so each completeBy is recognisable. */
const fanDef: WorkflowDefinitionInput = {
  name: 'fan',
  steps: [
    { name: 'a', agent: 'inventory', budgetMs: 1_000 },
    { name: 'b', agent: 'payment', budgetMs: 2_000, dependsOn: ['a'], needs: ['a'] },
    { name: 'c', agent: 'shipping', budgetMs: 3_000, dependsOn: ['a'] },
    { name: 'd', agent: 'notify', budgetMs: 4_000, dependsOn: ['b', 'c'], needs: ['b', 'c'] },
  ],
};
const fanPlan = plan(fanDef);

const input = encode({ orderId: 'o-1', amount: 42 });

/** A lease these tests' transitions take and keep taking (same token): only its holder ever uses it. */
const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };

function createArgs(taskId: string, p: PlanStep[] = fanPlan, now = T0) {
  return { lease: HELD, taskId, workflow: 'fan', version: 1, input, plan: p, onFailure: 'error' as const, client: 'client-1', now, schedulerId: 'sched-1' };
}

/** The agent type of each step name these tests use (fanPlan's, and the single-step plans' `s`). */
const AGENT_OF: Record<string, string> = { a: 'inventory', b: 'payment', c: 'shipping', d: 'notify', s: 'x' };

function ok(taskId: string, step: string, attempt: number, now: number, output: unknown = { from: step }) {
  return { lease: HELD, taskId, step, kind: 'run' as const, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: AGENT_OF[step] ?? step, outcome: { ok: true as const, output: encode(output) } };
}

function fail(taskId: string, step: string, attempt: number, now: number, message: string, retryable: boolean, effect: 'none' | 'unknown' = 'unknown') {
  return { lease: HELD, taskId, step, kind: 'run' as const, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: AGENT_OF[step] ?? step, outcome: { ok: false as const, message, retryable, effect } };
}

/** Every field of the task hash as hex, for "nothing changed" comparisons. */
async function rawTask(store: TaskStore, taskId: string, omit: string[] = []): Promise<Record<string, string>> {
  const h = await r().hgetallBuffer(store.keys.task(taskId));
  return Object.fromEntries(
    Object.entries(h)
      .filter(([k]) => !omit.includes(k))
      .map(([k, v]) => [k, v.toString('hex')]),
  );
}

async function deadlines(store: TaskStore): Promise<Record<string, number>> {
  return Object.fromEntries(await indexMap(r(), store, 'deadlines'));
}

async function staleResults(store: TaskStore, taskId: string): Promise<number> {
  return Number((await r().hget(store.keys.task(taskId), 'staleResults')) ?? 0);
}

async function stepOf(store: TaskStore, taskId: string, step: string) {
  const t = await store.getTask(taskId);
  const s = t?.steps.find((x) => x.name === step);
  if (!s) throw new Error(`no step ${step} in task ${taskId}`);
  return s;
}

// ---------------------------------------------------------------------------------------------

describe('createTask', () => {
  it('starts only the dependency-free steps and returns them in dispatch with attempt 1 and completeBy = now + budget', async () => {
    const store = new TaskStore(r(), ns());
    const out = await store.createTask(createArgs('task-1'));
    if (!out.created) throw new Error('expected created');
    const t = out.transition;
    expect(t.dispatch).toEqual([{ step: 'a', agent: 'inventory', kind: 'run', attempt: 1, completeBy: T0 + 1_000, needs: [] }]);
    expect(t.status).toBe('running');
    expect(t.workflow).toBe('fan');
    expect(t.version).toBe(1);
    expect(t.lockEpoch).toBe(1);
    expect(t.events.map((e) => [e.type, e.seq, e.step])).toEqual([
      ['received', 1, undefined],
      ['step_started', 2, 'a'],
    ]);
    expect(Buffer.from(t.input ?? []).equals(Buffer.from(input))).toBe(true);

    const state = await store.getTask('task-1');
    expect(state).toMatchObject({ taskId: 'task-1', workflow: 'fan', version: 1, status: 'running', input: { orderId: 'o-1', amount: 42 }, createdAt: T0, lockEpoch: 1 });
    expect(state?.steps.map((s) => [s.name, s.status, s.attempt, s.completeBy])).toEqual([
      ['a', 'processing', 1, T0 + 1_000],
      ['b', 'pending', 0, undefined],
      ['c', 'pending', 0, undefined],
      ['d', 'pending', 0, undefined],
    ]);
    expect(await deadlines(store)).toEqual({ 'task-1|a': T0 + 1_000 });
    expect(await store.listTasks({ limit: 10 })).toEqual([{ taskId: 'task-1', workflow: 'fan', version: 1, status: 'running', createdAt: T0, updatedAt: T0 }]);
  });

  it('starts every root step of a workflow with several', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'roots', steps: [{ name: 'x', agent: 'a1', budgetMs: 50 }, { name: 'y', agent: 'a2', budgetMs: 70 }, { name: 'z', agent: 'a3', dependsOn: ['x', 'y'] }] });
    const out = await store.createTask(createArgs('roots-1', p, T0 + 5));
    if (!out.created) throw new Error('expected created');
    expect(out.transition.dispatch).toEqual([
      { step: 'x', agent: 'a1', kind: 'run', attempt: 1, completeBy: T0 + 55, needs: [] },
      { step: 'y', agent: 'a2', kind: 'run', attempt: 1, completeBy: T0 + 75, needs: [] },
    ]);
  });

  it('a duplicate createTask returns created:false with the status and changes nothing', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('dup-1'));
    const before = await rawTask(store, 'dup-1');
    const dl = await deadlines(store);
    const again = await store.createTask({ ...createArgs('dup-1', fanPlan, T0 + 50), schedulerId: 'sched-2' });
    expect(again).toEqual({ created: false, status: 'running', client: 'client-1' });
    expect(await rawTask(store, 'dup-1')).toEqual(before);
    expect(await deadlines(store)).toEqual(dl);
  });
});

describe('applyResult', () => {
  it('moves the step to processed and starts exactly the newly ready steps (d only after both b and c)', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('fan-1'));

    const ra = await store.applyResult(ok('fan-1', 'a', 1, T0 + 100, { reservationId: 'r-1' }));
    if (!ra.applied) throw new Error(ra.reason);
    expect(ra.transition.dispatch).toEqual([
      { step: 'b', agent: 'payment', kind: 'run', attempt: 1, completeBy: T0 + 100 + 2_000, needs: ['a'] },
      { step: 'c', agent: 'shipping', kind: 'run', attempt: 1, completeBy: T0 + 100 + 3_000, needs: [] },
    ]);
    // The outputs the dispatched steps need travel with the transition.
    expect([...ra.transition.outputs.keys()]).toEqual(['a']);
    expect(unpackTrusted(ra.transition.outputs.get('a') as Uint8Array)).toEqual({ reservationId: 'r-1' });
    expect(ra.transition.input).toBeDefined();
    expect(ra.transition.events.map((e) => [e.type, e.step])).toEqual([
      ['step_done', 'a'],
      ['step_started', 'b'],
      ['step_started', 'c'],
    ]);
    const a = await stepOf(store, 'fan-1', 'a');
    expect(a).toMatchObject({ status: 'processed', attempt: 1, finishedAt: T0 + 100, output: { reservationId: 'r-1' }, lockedBy: 'agent-1' });
    expect(await deadlines(store)).toEqual({ 'fan-1|b': T0 + 2_100, 'fan-1|c': T0 + 3_100 });

    const rb = await store.applyResult(ok('fan-1', 'b', 1, T0 + 200));
    if (!rb.applied) throw new Error(rb.reason);
    expect(rb.transition.dispatch).toEqual([]);
    expect((await stepOf(store, 'fan-1', 'd')).status).toBe('pending');

    const rc = await store.applyResult(ok('fan-1', 'c', 1, T0 + 300));
    if (!rc.applied) throw new Error(rc.reason);
    expect(rc.transition.dispatch).toEqual([{ step: 'd', agent: 'notify', kind: 'run', attempt: 1, completeBy: T0 + 4_300, needs: ['b', 'c'] }]);
    expect(new Set(rc.transition.outputs.keys())).toEqual(new Set(['b', 'c']));
    expect(unpackTrusted(rc.transition.outputs.get('c') as Uint8Array)).toEqual({ from: 'c' });
    expect(rc.transition.status).toBe('running');

    const rd = await store.applyResult(ok('fan-1', 'd', 1, T0 + 400));
    if (!rd.applied) throw new Error(rd.reason);
    expect(rd.transition.status).toBe('completed');
    expect(rd.transition.dispatch).toEqual([]);
    expect(rd.transition.events.map((e) => e.type)).toEqual(['step_done', 'completed']);
    const done = await store.getTask('fan-1');
    expect(done).toMatchObject({ status: 'completed', finishedAt: T0 + 400, updatedAt: T0 + 400 });
    expect(done?.steps.every((s) => s.status === 'processed')).toBe(true);
    expect(await deadlines(store)).toEqual({});
    expect(await r().zscore(store.keys.forTask('fan-1').finished, 'fan-1')).toBe(String(T0 + 400));
    // Event sequence numbers grow by one across all transitions of the task.
    const seqs = [...ra.transition.events, ...rb.transition.events, ...rc.transition.events, ...rd.transition.events].map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i));
  });

  it('rejects a result for a wrong attempt, or a second result for the same attempt; nothing changes and staleResults counts them', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('stale-1'));
    expect((await store.applyResult(ok('stale-1', 'a', 1, T0 + 100))).applied).toBe(true);
    expect(await staleResults(store, 'stale-1')).toBe(0);

    const before = await store.getTask('stale-1');
    const rawBefore = await rawTask(store, 'stale-1', ['staleResults']);
    const dlBefore = await deadlines(store);

    // A duplicate delivery of a's result (a is processed now).
    const dup = await store.applyResult(ok('stale-1', 'a', 1, T0 + 150, { other: true }));
    expect(dup.applied).toBe(false);
    if (!dup.applied) expect(dup.reason).toMatch(/processed/);
    expect(await staleResults(store, 'stale-1')).toBe(1);

    // A result for an attempt b never had, ok and failed.
    const wrong = await store.applyResult(ok('stale-1', 'b', 2, T0 + 160));
    expect(wrong.applied).toBe(false);
    if (!wrong.applied) expect(wrong.reason).toMatch(/attempt 1.*attempt 2/);
    expect((await store.applyResult(fail('stale-1', 'b', 0, T0 + 170, 'boom', false))).applied).toBe(false);
    expect(await staleResults(store, 'stale-1')).toBe(3);

    expect(await store.getTask('stale-1')).toEqual(before);
    expect(await rawTask(store, 'stale-1', ['staleResults'])).toEqual(rawBefore);
    expect(await deadlines(store)).toEqual(dlBefore);
  });

  it('a result for an attempt superseded by a supervisor retry is stale', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('super-1'));
    const e = await store.expireStep('super-1', 'a', T0 + 1_000, 1);
    expect(e).toMatchObject({ action: 'retry', attempt: 2 });
    const before = await rawTask(store, 'super-1', ['staleResults']);
    const late = await store.applyResult(ok('super-1', 'a', 1, T0 + 1_001));
    expect(late.applied).toBe(false);
    expect(await rawTask(store, 'super-1', ['staleResults'])).toEqual(before);
    expect(await staleResults(store, 'super-1')).toBe(1);
    expect((await store.applyResult(ok('super-1', 'a', 2, T0 + 1_002))).applied).toBe(true);
  });

  it('a permanent failure fails the step and the task (onFailure error): the step in flight is abandoned, the alert recorded', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('perm-1'));
    await store.applyResult(ok('perm-1', 'a', 1, T0 + 100));
    const res = await store.applyResult(fail('perm-1', 'b', 1, T0 + 200, 'card declined', false));
    if (!res.applied) throw new Error(res.reason);
    expect(res.transition.status).toBe('failed');
    expect(res.transition.dispatch).toEqual([]);
    // c was in flight alongside b: it stops with the task.
    expect(res.transition.events.map((e) => [e.type, e.step])).toEqual([
      ['step_failed', 'b'],
      ['step_abandoned', 'c'],
      ['failed', undefined],
    ]);
    expect((await stepOf(store, 'perm-1', 'c')).status).toBe('abandoned');
    // The alert is written by the transition itself: open, and in the outbox for the supervisor to publish.
    expect(await store.openAlerts()).toEqual([
      { id: 'perm-1:b:step_failed:1', kind: 'step_failed', taskId: 'perm-1', step: 'b', failureCount: 0, lastError: 'card declined', raisedAt: T0 + 200 },
    ]);
    expect((await store.pendingAlerts(10)).map((p) => p.alert)).toEqual(await store.openAlerts());
    const t = await store.getTask('perm-1');
    expect(t?.status).toBe('failed');
    expect(t?.finishedAt).toBe(T0 + 200);
    expect(t?.error).toContain('card declined');
    expect(await stepOf(store, 'perm-1', 'b')).toMatchObject({ status: 'failed', error: 'card declined', finishedAt: T0 + 200 });
    expect((await stepOf(store, 'perm-1', 'd')).status).toBe('pending');
    expect(Object.keys(await deadlines(store))).not.toContain('perm-1|b');
    // Nothing more is applied to a finished task; d never starts.
    const before = await rawTask(store, 'perm-1', ['staleResults']);
    const late = await store.applyResult(ok('perm-1', 'c', 1, T0 + 300));
    expect(late.applied).toBe(false);
    if (!late.applied) expect(late.reason).toMatch(/task is failed/);
    // Counted like every other stale result (ADR 0001), and nothing else changes.
    expect(await staleResults(store, 'perm-1')).toBe(1);
    expect(await rawTask(store, 'perm-1', ['staleResults'])).toEqual(before);
    expect((await store.getTask('perm-1'))?.status).toBe('failed');
    expect((await stepOf(store, 'perm-1', 'd')).status).toBe('pending');
  });

  it('a retryable failure keeps the step processing and moves its deadline to now', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('retry-1'));
    const res = await store.applyResult(fail('retry-1', 'a', 1, T0 + 300, 'upstream 503', true));
    if (!res.applied) throw new Error(res.reason);
    expect(res.transition.status).toBe('running');
    expect(res.transition.dispatch).toEqual([]);
    expect(res.transition.events.map((e) => [e.type, e.reason])).toEqual([['step_failed', 'upstream 503']]);
    expect(await stepOf(store, 'retry-1', 'a')).toMatchObject({ status: 'processing', attempt: 1, completeBy: T0 + 300, error: 'upstream 503' });
    expect(await deadlines(store)).toEqual({ 'retry-1|a': T0 + 300 });
    expect(await store.expiredSteps(T0 + 300, 10)).toEqual([{ taskId: 'retry-1', step: 'a', completeBy: T0 + 300 }]);
    // The supervisor then applies the ladder (default: retry at once), keeping the error in the event.
    const e = await store.expireStep('retry-1', 'a', T0 + 301, 1);
    expect(e.action).toBe('retry');
    expect(e.dispatch).toEqual([{ step: 'a', agent: 'inventory', kind: 'run', attempt: 2, completeBy: T0 + 1_301, needs: [] }]);
    expect(e.events[0]).toMatchObject({ type: 'step_retried', reason: 'upstream 503', attempt: 2 });
  });

  it('unknown task and unknown step are typed errors', async () => {
    const store = new TaskStore(r(), ns());
    await expect(store.applyResult(ok('nope', 'a', 1, T0))).rejects.toMatchObject({ code: ErrorCode.UnknownTask });
    await store.createTask(createArgs('known-1'));
    await expect(store.applyResult(ok('known-1', 'zzz', 1, T0))).rejects.toMatchObject({ code: ErrorCode.UnknownStep });
  });
});

describe('expireStep', () => {
  const ladderPlan = plan({ name: 'ladder', steps: [{ name: 'a', agent: 'flaky', budgetMs: 1_000, ladder: { retries: 1, longBackoffMs: 1_000, maxFailures: 3 } }] });

  it('follows the ladder: retry (attempt 2) → park → retry after the park time → error (task failed)', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('lad-1', ladderPlan, T0));

    // Before the deadline: nothing happens.
    const early = await store.expireStep('lad-1', 'a', T0 + 999, 1);
    expect(early.action).toBe('noop');
    expect(await stepOf(store, 'lad-1', 'a')).toMatchObject({ status: 'processing', attempt: 1, failureCount: 0 });

    // failureCount 1 <= retries 1: retry at once.
    const e1 = await store.expireStep('lad-1', 'a', T0 + 1_000, 1);
    expect(e1).toMatchObject({ action: 'retry', attempt: 2, failureCount: 1 });
    expect(e1.dispatch).toEqual([{ step: 'a', agent: 'flaky', kind: 'run', attempt: 2, completeBy: T0 + 2_000, needs: [] }]);
    expect(e1.events.map((e) => e.type)).toEqual(['step_retried']);
    expect(await deadlines(store)).toEqual({ 'lad-1|a': T0 + 2_000 });

    // failureCount 2 > retries, < maxFailures: parked for longBackoffMs.
    const e2 = await store.expireStep('lad-1', 'a', T0 + 2_000, 1);
    expect(e2).toMatchObject({ action: 'park', attempt: 2, failureCount: 2 });
    expect(e2.dispatch).toEqual([]);
    expect(e2.events.map((e) => e.type)).toEqual(['step_parked']);
    expect(await stepOf(store, 'lad-1', 'a')).toMatchObject({ status: 'parked', attempt: 2, completeBy: T0 + 3_000 });
    expect(await deadlines(store)).toEqual({ 'lad-1|a': T0 + 3_000 });

    // Still parked before the park time passes.
    expect((await store.expireStep('lad-1', 'a', T0 + 2_999, 1)).action).toBe('noop');
    expect((await stepOf(store, 'lad-1', 'a')).status).toBe('parked');

    // Park time passed: retry (the failure was already counted).
    const e3 = await store.expireStep('lad-1', 'a', T0 + 3_000, 1);
    expect(e3).toMatchObject({ action: 'retry', attempt: 3, failureCount: 2 });
    expect(e3.dispatch).toEqual([{ step: 'a', agent: 'flaky', kind: 'run', attempt: 3, completeBy: T0 + 4_000, needs: [] }]);
    expect(await stepOf(store, 'lad-1', 'a')).toMatchObject({ status: 'processing', attempt: 3 });

    // failureCount 3 >= maxFailures: error, the task fails.
    const e4 = await store.expireStep('lad-1', 'a', T0 + 4_000, 1);
    expect(e4).toMatchObject({ action: 'error', failureCount: 3 });
    expect(e4.lastError).toMatch(/complete-by passed/);
    expect(e4.events.map((e) => e.type)).toEqual(['step_error', 'failed']);
    const t = await store.getTask('lad-1');
    expect(t?.status).toBe('failed');
    expect(t?.finishedAt).toBe(T0 + 4_000);
    expect(t?.steps[0]).toMatchObject({ status: 'error', failureCount: 3, attempt: 3 });
    expect(await deadlines(store)).toEqual({});
    // The transition that marked the error recorded the alert (decision 0009): nothing for a caller to do.
    const [alert] = await store.openAlerts();
    expect(alert).toMatchObject({ id: 'lad-1:a:step_error:3', kind: 'step_error', taskId: 'lad-1', step: 'a', failureCount: 3, raisedAt: T0 + 4_000 });
    expect(alert?.lastError).toMatch(/complete-by passed/);
    expect(await store.pendingAlerts(10)).toHaveLength(1);

    // Anything after the end is a no-op.
    expect((await store.expireStep('lad-1', 'a', T0 + 9_000, 1)).action).toBe('noop');
  });

  it('an epoch lower than the stored supervisor epoch throws STALE and changes nothing', async () => {
    const namespace = ns();
    const store = new TaskStore(r(), namespace);
    await store.createTask(createArgs('epoch-1', ladderPlan, T0));
    // Two real elections: A (epoch 1) resigns, B is elected with epoch 2.
    const a = new Leadership({ redis: r(), namespace, id: 'sup-a', leaseMs: 10_000 });
    const b = new Leadership({ redis: r(), namespace, id: 'sup-b', leaseMs: 10_000 });
    await a.start();
    expect(a.isLeader()).toBe(true);
    await a.stop();
    await b.start();
    expect([a.currentEpoch(), b.currentEpoch(), Number(b.isLeader())]).toEqual([1, 2, 1]);

    const before = await rawTask(store, 'epoch-1');
    const dlBefore = await deadlines(store);
    let caught: unknown;
    try {
      await store.expireStep('epoch-1', 'a', T0 + 5_000, a.currentEpoch());
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(TriadError);
    expect(isTriadError(caught, ErrorCode.Stale)).toBe(true);
    expect(await rawTask(store, 'epoch-1')).toEqual(before);
    expect(await deadlines(store)).toEqual(dlBefore);
    // The current leader's epoch (and a newer one) is accepted.
    expect((await store.expireStep('epoch-1', 'a', T0 + 5_000, b.currentEpoch())).action).toBe('retry');
    await b.stop();
  });

  it('an unknown task is a noop and its index entry is removed', async () => {
    const store = new TaskStore(r(), ns());
    await r().zadd(store.keys.forTask('ghost').deadlines, T0, 'ghost|a');
    expect(await store.expireStep('ghost', 'a', T0 + 1, 1)).toEqual({ action: 'noop', kind: 'run', client: 'default', events: [], dispatch: [] });
    expect(await deadlines(store)).toEqual({});
  });
});

describe('the deadline index', () => {
  it('expiredSteps(now) returns only the steps whose completeBy <= now, however many finished tasks exist', async () => {
    const store = new TaskStore(r(), ns());
    const single = plan({ name: 'one', steps: [{ name: 's', agent: 'x', budgetMs: 10_000 }] });
    // 1000 finished tasks (created and completed) and 50 in flight with a later deadline.
    await Promise.all(
      Array.from({ length: 1_000 }, async (_, i) => {
        const id = `done-${i}`;
        await store.createTask(createArgs(id, single, T0));
        const res = await store.applyResult(ok(id, 's', 1, T0 + 10));
        if (!res.applied) throw new Error(res.reason);
      }),
    );
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.createTask(createArgs(`later-${i}`, single, T0))));
    // Three steps expiring by T0+1000 (one exactly at it) and one just after.
    const budgets: [string, number][] = [['exp-1', 500], ['exp-2', 800], ['exp-3', 1_000], ['not-yet', 1_001]];
    for (const [id, b] of budgets) await store.createTask(createArgs(id, plan({ name: 'one', steps: [{ name: 's', agent: 'x', budgetMs: b }] }), T0));

    expect((await indexMap(r(), store, 'deadlines')).size).toBe(50 + 4);
    expect((await indexMap(r(), store, 'finished')).size).toBe(1_000);
    const expired = await store.expiredSteps(T0 + 1_000, 100);
    expect(expired).toEqual([
      { taskId: 'exp-1', step: 's', completeBy: T0 + 500 },
      { taskId: 'exp-2', step: 's', completeBy: T0 + 800 },
      { taskId: 'exp-3', step: 's', completeBy: T0 + 1_000 },
    ]);
    expect(await store.countExpired(T0 + 1_000)).toBe(3);
    // The limit takes the oldest first.
    expect((await store.expiredSteps(T0 + 1_000, 2)).map((e) => e.taskId)).toEqual(['exp-1', 'exp-2']);
    expect(await store.expiredSteps(T0 + 499, 100)).toEqual([]);
    // The supervisor's next wake-up: the earliest deadline of all, whatever has finished.
    expect(await store.nextDeadline()).toBe(T0 + 500);
    expect(await new TaskStore(r(), ns()).nextDeadline()).toBeUndefined();
  });

  it('inFlight returns the processing steps with the outputs they need', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('fl-1'));
    const ra = await store.applyResult(ok('fl-1', 'a', 1, T0 + 100, { reservationId: 'r-7' }));
    if (!ra.applied) throw new Error(ra.reason);
    const t = await store.inFlight('fl-1');
    expect(t).toBeDefined();
    expect(t?.status).toBe('running');
    expect(t?.workflow).toBe('fan');
    expect(t?.version).toBe(1);
    // The same requests the transition dispatched: same attempt and completeBy.
    expect(t?.dispatch).toEqual(ra.transition.dispatch);
    expect([...(t?.outputs.keys() ?? [])]).toEqual(['a']);
    expect(unpackTrusted(t?.outputs.get('a') as Uint8Array)).toEqual({ reservationId: 'r-7' });
    expect(unpackTrusted(t?.input as Uint8Array)).toEqual({ orderId: 'o-1', amount: 42 });

    await store.applyResult(ok('fl-1', 'b', 1, T0 + 200));
    expect((await store.inFlight('fl-1'))?.dispatch.map((d) => d.step)).toEqual(['c']);
    await store.applyResult(ok('fl-1', 'c', 1, T0 + 300));
    const last = await store.inFlight('fl-1');
    expect(last?.dispatch).toEqual([{ step: 'd', agent: 'notify', kind: 'run', attempt: 1, completeBy: T0 + 4_300, needs: ['b', 'c'] }]);
    expect(new Set(last?.outputs.keys())).toEqual(new Set(['b', 'c']));
    await store.applyResult(ok('fl-1', 'd', 1, T0 + 400));
    // Finished or unknown tasks have nothing in flight.
    expect(await store.inFlight('fl-1')).toBeUndefined();
    expect(await store.inFlight('no-such-task')).toBeUndefined();
  });

  it('stepInFlight reads one request in flight field by field, only at its current attempt', async () => {
    const store = new TaskStore(r(), ns());
    expect((await new WorkflowStore(r(), store.namespace).register(validateDefinition(fanDef), T0)).version).toBe(1);
    await store.createTask(createArgs('sf-1'));
    await store.applyResult(ok('sf-1', 'a', 1, T0 + 100, { reservationId: 'r-7' }));
    const t = await store.stepInFlight('sf-1', 'b', 'run', 1);
    expect(t?.dispatch).toEqual([{ step: 'b', agent: 'payment', kind: 'run', attempt: 1, completeBy: T0 + 2_100, needs: ['a'] }]);
    expect(t?.client).toBe('client-1');
    expect(unpackTrusted(t?.outputs.get('a') as Uint8Array)).toEqual({ reservationId: 'r-7' });
    expect(unpackTrusted(t?.input as Uint8Array)).toEqual({ orderId: 'o-1', amount: 42 });
    // Another attempt, another kind, a step not in flight, an unknown task: nothing to send.
    expect(await store.stepInFlight('sf-1', 'b', 'run', 2)).toBeUndefined();
    expect(await store.stepInFlight('sf-1', 'b', 'compensate', 1)).toBeUndefined();
    expect(await store.stepInFlight('sf-1', 'a', 'run', 1)).toBeUndefined();
    expect(await store.stepInFlight('sf-1', 'nope', 'run', 1)).toBeUndefined();
    expect(await store.stepInFlight('no-such-task', 'b', 'run', 1)).toBeUndefined();
    // The retry the supervisor starts is what a retry command then finds.
    const e = await store.expireStep('sf-1', 'b', T0 + 2_100, 1);
    expect(e).toMatchObject({ action: 'retry', workflow: 'fan', createdAt: T0 });
    expect((await store.stepInFlight('sf-1', 'b', 'run', 2))?.dispatch).toEqual(e.dispatch);
  });
});

describe('WorkflowStore', () => {
  const v1 = validateDefinition({ name: 'orders', description: 'first', steps: [{ name: 'reserve', agent: 'inventory' }] });
  const v2 = validateDefinition({
    name: 'orders',
    description: 'second',
    steps: [{ name: 'reserve', agent: 'inventory' }, { name: 'charge', agent: 'payment', dependsOn: ['reserve'] }],
  });

  it('versions: same document → same version; changed → next; same version with another document → VERSION_CONFLICT', async () => {
    const store = new WorkflowStore(r(), ns());
    expect(await store.register(v1, T0)).toEqual({ version: 1, created: true });
    expect(await store.register(v1, T0 + 1)).toEqual({ version: 1, created: false });
    // The same document with its keys in another order is the same document.
    const reordered = validateDefinition({ steps: [{ agent: 'inventory', name: 'reserve' }], description: 'first', name: 'orders' });
    expect(await store.register(reordered, T0 + 2)).toEqual({ version: 1, created: false });
    expect(await store.register(v2, T0 + 3)).toEqual({ version: 2, created: true });
    // Explicitly asking for an existing version with its own document is idempotent.
    expect(await store.register({ ...v1, version: 1 }, T0 + 4)).toEqual({ version: 1, created: false });

    let caught: unknown;
    try {
      await store.register({ ...v2, version: 1 }, T0 + 5);
    } catch (e) {
      caught = e;
    }
    expect(isTriadError(caught, ErrorCode.VersionConflict)).toBe(true);
    expect(String((caught as Error).message)).toContain('orders');

    const latest = await store.get('orders');
    expect(latest).toEqual({ ...v2, version: 2, registeredAt: T0 + 3 });
    const pinned = await store.get('orders', 1);
    expect(pinned).toEqual({ ...v1, version: 1, registeredAt: T0 });
    expect(await store.get('orders', 3)).toBeUndefined();
    expect(await store.get('unknown')).toBeUndefined();
    expect(await store.list()).toEqual([{ name: 'orders', latest: 2, versions: [1, 2], description: 'second' }]);
  });

  it('an explicit new version is stored under that number and becomes the latest', async () => {
    const store = new WorkflowStore(r(), ns());
    expect(await store.register({ ...v1, version: 5 }, T0)).toEqual({ version: 5, created: true });
    expect((await store.get('orders'))?.version).toBe(5);
    expect(await store.register(v2, T0 + 1)).toEqual({ version: 6, created: true });
    expect((await store.get('orders', 5))?.description).toBe('first');
  });
});

describe('leases taken inside the transitions (decision 0006)', () => {
  it('a transition that finds the lease held by another instance is refused as busy and writes nothing', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('lease-1'));
    const before = await rawTask(store, 'lease-1');
    const busyKey = store.keys.lease('lease-1', 'task');
    await r().set(busyKey, 'someone-else', 'PX', 60_000);
    const mine = { key: busyKey, token: 'mine', ms: 5_000 };
    const refused = await store.applyResult({ ...ok('lease-1', 'a', 1, T0 + 100), lease: mine }).catch((e: unknown) => e);
    expect(isLeaseBusy(refused)).toBe(true);
    expect(refused).toMatchObject({ code: 'UNAVAILABLE' });
    await expect(store.createTask({ ...createArgs('lease-2'), lease: mine })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await rawTask(store, 'lease-1')).toEqual(before);
    expect(await r().exists(store.keys.task('lease-2'))).toBe(0);
    expect(await r().get(busyKey)).toBe('someone-else');
  });

  it('the transition takes the lease for its duration; a lapsed holder is fenced out by the next; a release by a non-holder does nothing', async () => {
    const namespace = ns();
    // Two scheduler processes, each with its own Leases.
    const leases = new Leases(r(), namespace);
    const other = new Leases(r(), namespace);
    const store = new TaskStore(r(), namespace);
    const first = leases.task('L1', 300);
    const second = other.task('L1', 5_000);
    expect(first.token).not.toBe(second.token);
    expect(await store.createTask({ ...createArgs('L1'), lease: first })).toMatchObject({ created: true });
    expect(await r().get(first.key)).toBe(first.token);
    const ttl = await r().pttl(first.key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(300);
    // While the first holds it, the second's transition is refused and changes nothing.
    const before = await rawTask(store, 'L1');
    await expect(store.applyResult({ ...ok('L1', 'a', 1, T0 + 10), lease: second })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await rawTask(store, 'L1')).toEqual(before);
    // The first pauses past its lease: the second takes the lease in its transition...
    await expect.poll(() => r().exists(first.key), { timeout: 10_000, interval: 20, message: "the first's 300 ms lease to lapse (its key to expire)" }).toBe(0);
    // (A later claim of the first's own process would take over only its own lease, not the second's.)
    expect(await store.applyResult({ ...ok('L1', 'a', 1, T0 + 20), lease: second })).toMatchObject({ applied: true });
    expect(await r().get(first.key)).toBe(second.token);
    // ...and the first, waking, writes nothing.
    const afterSecond = await rawTask(store, 'L1');
    await expect(store.applyResult({ ...ok('L1', 'b', 1, T0 + 30), lease: first })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(await rawTask(store, 'L1')).toEqual(afterSecond);
    // Release is Redlock's compare-and-delete on the token the transition set: a non-holder's does nothing.
    await leases.release(first);
    expect(await r().get(first.key)).toBe(second.token);
    await other.release(second);
    expect(await r().exists(first.key)).toBe(0);
  });

  it("a process's next operation takes over its own lease whose release has not gone out; other processes' are refused", async () => {
    const namespace = ns();
    const mine = new Leases(r(), namespace);
    const theirs = new Leases(r(), namespace);
    const store = new TaskStore(r(), namespace);
    const op1 = mine.task('own-1');
    await store.createTask({ ...createArgs('own-1'), lease: op1 });
    // op1's release has not been sent: this process's next operation on the task still goes ahead...
    const op2 = mine.task('own-1');
    expect(await store.applyResult({ ...ok('own-1', 'a', 1, T0 + 10), lease: op2 })).toMatchObject({ applied: true });
    expect(await r().get(op1.key)).toBe(op2.token);
    // ...another process's does not.
    await expect(store.applyResult({ ...ok('own-1', 'b', 1, T0 + 20), lease: theirs.task('own-1') })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    // The late release of op1 leaves op2's lease alone; releases sent in one turn go out together.
    await Promise.all([mine.release(op1), theirs.release(theirs.task('own-1'))]);
    expect(await r().get(op1.key)).toBe(op2.token);
    await mine.release(op2);
    expect(await r().exists(op1.key)).toBe(0);
  });

  it("a transition never records a time before the task's last one (a caller that read its clock, then waited for the lease)", async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('clock-1'));
    await store.applyResult(ok('clock-1', 'a', 1, T0 + 100));
    // b's result comes from a scheduler that read its clock at T0 + 50, before a's transition.
    await store.applyResult(ok('clock-1', 'b', 1, T0 + 50));
    await store.applyResult(ok('clock-1', 'c', 1, T0 + 120));
    const t = (await store.getTask('clock-1'))!;
    const step = (name: string) => t.steps.find((x) => x.name === name)!;
    expect(step('b').finishedAt).toBe(T0 + 100);
    expect(step('b').finishedAt!).toBeGreaterThanOrEqual(step('a').finishedAt!);
    expect(step('d').startedAt!).toBeGreaterThanOrEqual(Math.max(step('b').finishedAt!, step('c').finishedAt!));
  });

  it('records which agent instance ran an attempt from its result; a result on another agent type\'s subject is forged: counted, nothing applied', async () => {
    const store = new TaskStore(r(), ns());
    await store.createTask(createArgs('who-1'));
    const before = await rawTask(store, 'who-1');
    // a is inventory's step: payment's agent (or anyone allowed only payment's result subject) cannot report it.
    const forged = await store.applyResult({ ...ok('who-1', 'a', 1, T0 + 10), agentType: 'payment' });
    expect(forged).toEqual({ applied: false, forged: true, reason: "the run of step a is agent inventory's, but the result came on agent payment's subject" });
    expect(await rawTask(store, 'who-1', ['forgedResults'])).toEqual(before);
    expect(await r().hget(store.keys.task('who-1'), 'forgedResults')).toBe('1');
    expect(await store.applyResult({ ...ok('who-1', 'a', 1, T0 + 20), agentId: 'inventory-host-7' })).toMatchObject({ applied: true });
    expect((await store.getTask('who-1'))?.steps[0]).toMatchObject({ status: 'processed', lockedBy: 'inventory-host-7' });
    expect((await store.getTask('who-1'))?.client).toBe('client-1');
  });
});

describe('WAIT for replicas (decision 0015)', () => {
  it('a creation not acknowledged by the replicas asked for is not confirmed: UNAVAILABLE, and again on the redelivery', async () => {
    // This Redis has no replica: WAIT 1 returns 0 after its timeout.
    const store = new TaskStore(r(), ns(), { waitReplicas: 1, waitMs: 50 });
    const started = Date.now();
    const err = await store.createTask(createArgs('wait-1')).catch((e: unknown) => e);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(err).toMatchObject({ code: ErrorCode.Unavailable });
    expect((err as Error).message).toMatch(/acknowledged by 0 of 1 replica\(s\) within 50 ms \(TRIAD_REDIS_WAIT_REPLICAS/);
    // Written on the primary all the same: the redelivered submission finds it, and is not confirmed either.
    expect(await r().exists(store.keys.task('wait-1'))).toBe(1);
    await expect(store.createTask(createArgs('wait-1'))).rejects.toMatchObject({ code: ErrorCode.Unavailable });
    // Without WAIT (a single Redis), the same duplicate is confirmed at once.
    expect(await new TaskStore(r(), store.namespace).createTask(createArgs('wait-1'))).toMatchObject({ created: false, status: 'running' });
  });
});
