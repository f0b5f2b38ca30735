// Signals (decision 0019 §3, R6–R9; increment 5) on a real redis-server: a waitFor step waits with its
// timeout in the deadline index; a signal is delivered to it (its data the step's output), kept when it
// comes early and consumed when the step starts, answered `duplicate` for an id seen before, and refused
// with the reason otherwise — unknown or another client's task, a task not running, a name no step waits
// for, a late one, a full buffer. A wait that times out gives up (the task's onFailure applies), and a
// retry waits again with an alert of its own.
import { describe, expect, it } from 'vitest';
import { encode, isTriadError, unpackTrusted, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-signals-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
const ns = (): string => `g${process.pid}-${++nsCounter}`;
const T0 = 1_700_000_000_000;
const EPOCH = 1;

function plan(def: WorkflowDefinitionInput): PlanStep[] {
  return compilePlan(validateDefinition(def));
}

/** reserve → approval (waitFor approved, 60 s) → ship (needs approval) */
const approve = (onFailure: 'error' | 'compensate' = 'error') =>
  plan({
    name: 'approve',
    onFailure,
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
      { name: 'approval', waitFor: { signal: 'approved', timeoutMs: 60_000 }, dependsOn: ['reserve'] },
      { name: 'ship', agent: 'shipping', dependsOn: ['approval'], needs: ['approval'] },
    ],
  });

async function created(store: TaskStore, taskId: string, p: PlanStep[], onFailure: 'error' | 'compensate' = 'error', client = 'web') {
  const out = await store.createTask({ lease: HELD, taskId, workflow: 'approve', version: 1, input: encode({}), plan: p, onFailure, client, now: T0, schedulerId: 'sched-1' });
  if (!out.created) throw new Error('expected a new task');
  return out.transition;
}

function ok(taskId: string, step: string, agent: string, now: number, kind: 'run' | 'compensate' = 'run') {
  return { lease: HELD, taskId, step, kind, attempt: 1, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: agent, outcome: { ok: true as const, output: encode({ step }) } };
}

const signal = (store: TaskStore, taskId: string, o: { name?: string; id: string; data?: unknown; client?: string; now?: number }) =>
  store.signalTask({ lease: HELD, taskId, name: o.name ?? 'approved', signalId: o.id, ...(o.data !== undefined ? { data: encode(o.data) } : {}), ...(o.client !== undefined ? { client: o.client } : {}), now: o.now ?? T0 + 100, schedulerId: 'sched-1' });

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  if (!isTriadError(e)) throw new Error(`expected a refusal, got ${String(e)}`);
  return { code: e.code, message: e.message };
}

async function waitingTask(store: TaskStore, taskId: string, onFailure: 'error' | 'compensate' = 'error') {
  await created(store, taskId, approve(onFailure), onFailure);
  const r1 = await store.applyResult(ok(taskId, 'reserve', 'inventory', T0 + 10));
  if (!r1.applied) throw new Error('expected applied');
  return r1.transition;
}

async function stepOf(store: TaskStore, taskId: string, name: string) {
  const s = (await store.getTask(taskId))?.steps.find((x) => x.name === name);
  if (!s) throw new Error(`no step ${name}`);
  return s;
}

describe('signals', () => {
  it('a waitFor step waits with its timeout in the index; a signal ends it with its data as output, and the next step starts', async () => {
    const store = new TaskStore(r(), ns());
    const t = await waitingTask(store, 'w1');
    expect(t.events.map((e) => [e.type, e.step, e.signal, e.until])).toEqual([
      ['step_done', 'reserve', undefined, undefined],
      ['step_waiting', 'approval', 'approved', T0 + 10 + 60_000],
    ]);
    expect(await indexMap(r(), store, 'deadlines')).toEqual(new Map([['w1|approval', T0 + 60_010]]));
    expect(await stepOf(store, 'w1', 'approval')).toMatchObject({ kind: 'signal', status: 'waiting', signal: 'approved', until: T0 + 60_010, effect: 'none' });

    const s = await signal(store, 'w1', { id: 'sig-1', data: { approvedBy: 'ana' }, now: T0 + 500 });
    expect(s.outcome).toBe('delivered');
    expect(s.step).toBe('approval');
    expect(s.transition.events.map((e) => [e.type, e.step, e.signal, e.reason])).toEqual([
      ['signal_received', 'approval', 'approved', 'id sig-1 from operator delivered to approval'],
      ['step_done', 'approval', undefined, undefined],
      ['step_started', 'ship', undefined, undefined],
    ]);
    // The next step's request carries the signal's data as the output it needs.
    expect(s.transition.dispatch).toEqual([expect.objectContaining({ step: 'ship', needs: ['approval'] })]);
    expect(unpackTrusted(s.transition.outputs.get('approval')!)).toEqual({ approvedBy: 'ana' });
    expect(await stepOf(store, 'w1', 'approval')).toMatchObject({ status: 'processed', output: { approvedBy: 'ana' }, signalId: 'sig-1', finishedAt: T0 + 500 });
    expect([...(await indexMap(r(), store, 'deadlines')).keys()]).toEqual(['w1|ship']);
  });

  it('sending the same id again is harmless: duplicate, with the step, and nothing changes; the id with another name is refused', async () => {
    const store = new TaskStore(r(), ns());
    await waitingTask(store, 'w2');
    await signal(store, 'w2', { id: 'sig-1', data: 1 });
    const before = await r().hgetall(store.keys.task('w2'));
    const again = await signal(store, 'w2', { id: 'sig-1', data: 2, now: T0 + 900 });
    expect(again.outcome).toBe('duplicate');
    expect(again.step).toBe('approval');
    expect(again.transition.events).toEqual([]);
    expect(await r().hgetall(store.keys.task('w2'))).toEqual(before);
    expect(await refusal(signal(store, 'w2', { id: 'sig-1', name: 'rejected' }))).toEqual({
      code: 'INVALID_STATE',
      message: 'signal rejected for task w2: not allowed in the current state: signal id sig-1 was already used for signal "approved"; use a new id',
    });
  });

  it('a signal that comes before its step waits is kept, and consumed (the oldest first) when the step starts', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'e1', approve());
    const early = await signal(store, 'e1', { id: 'early-1', data: { n: 1 }, client: 'web' });
    expect(early.outcome).toBe('buffered');
    expect(early.step).toBeUndefined();
    expect(early.transition.events.map((e) => [e.type, e.signal, e.reason])).toEqual([['signal_received', 'approved', 'id early-1 from client:web kept until step approval starts']]);
    await signal(store, 'e1', { id: 'early-2', data: { n: 2 } });
    expect((await store.getTask('e1'))?.signals).toEqual([
      { name: 'approved', signalId: 'early-1', at: T0 + 100, by: 'client:web' },
      { name: 'approved', signalId: 'early-2', at: T0 + 100, by: 'operator' },
    ]);
    // Sent again before it is consumed: still a duplicate, nothing buffered twice.
    expect((await signal(store, 'e1', { id: 'early-1' })).outcome).toBe('duplicate');

    const done = await store.applyResult(ok('e1', 'reserve', 'inventory', T0 + 200));
    if (!done.applied) throw new Error('expected applied');
    expect(done.transition.events.map((e) => [e.type, e.step])).toEqual([
      ['step_done', 'reserve'],
      ['signal_received', 'approval'],
      ['step_done', 'approval'],
      ['step_started', 'ship'],
    ]);
    expect(await stepOf(store, 'e1', 'approval')).toMatchObject({ status: 'processed', output: { n: 1 }, signalId: 'early-1' });
    expect((await store.getTask('e1'))?.signals).toEqual([{ name: 'approved', signalId: 'early-2', at: T0 + 100, by: 'operator' }]);
    // The consumed one answers duplicate with its step from now on.
    expect(await signal(store, 'e1', { id: 'early-1' })).toMatchObject({ outcome: 'duplicate', step: 'approval' });
  });

  it('keeps at most 16 signals per task: the 17th is refused and nothing is written', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'f1', approve());
    for (let i = 1; i <= 16; i++) expect((await signal(store, 'f1', { id: `s-${i}` })).outcome).toBe('buffered');
    const before = await r().hgetall(store.keys.task('f1'));
    expect(await refusal(signal(store, 'f1', { id: 's-17' }))).toEqual({
      code: 'UNAVAILABLE',
      message: 'signal approved for task f1: task f1 already holds 16 signals no step has consumed; send this one once step approval is waiting',
    });
    expect(await r().hgetall(store.keys.task('f1'))).toEqual(before);
  });

  it('refuses with the reason: no such task, another client\'s task (the same answer), a name no step waits for, a late signal, a task not running', async () => {
    const store = new TaskStore(r(), ns());
    expect((await refusal(signal(store, 'nope', { id: 'x' }))).code).toBe('UNKNOWN_TASK');
    await waitingTask(store, 'o1');
    const foreign = await refusal(signal(store, 'o1', { id: 'x', client: 'mallory' }));
    const missing = await refusal(signal(store, 'nope', { id: 'x', client: 'mallory' }));
    expect(foreign.code).toBe('UNKNOWN_TASK');
    expect(foreign.message.replace('o1', 'nope')).toBe(missing.message);
    expect(await refusal(signal(store, 'o1', { id: 'x', name: 'aproved' }))).toEqual({
      code: 'INVALID_STATE',
      message: 'signal aproved for task o1: not allowed in the current state: workflow approve@1 has no step waiting for signal "aproved" (its signals: approved)',
    });
    await signal(store, 'o1', { id: 'first' });
    expect((await refusal(signal(store, 'o1', { id: 'second' }))).message).toBe(
      'signal approved for task o1: not allowed in the current state: no step of task o1 will wait for signal "approved" any more (step approval is processed)',
    );
    await store.applyResult(ok('o1', 'ship', 'shipping', T0 + 300));
    expect((await refusal(signal(store, 'o1', { id: 'third' }))).message).toBe(
      'signal approved for task o1: not allowed in the current state: task o1 is completed: signals are accepted only while a task is running',
    );
  });

  it('a wait that times out fails its step and the task follows onFailure (error: failed with an alert); a retry waits again, with an alert of its own when it times out again', async () => {
    const store = new TaskStore(r(), ns());
    await waitingTask(store, 't1');
    expect((await store.expireStep('t1', 'approval', T0 + 60_009, EPOCH)).action).toBe('noop');
    const x = await store.expireStep('t1', 'approval', T0 + 60_010, EPOCH);
    expect(x.action).toBe('error');
    expect(x.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['step_error', 'approval', 'timed out after 60000 ms waiting for signal approved'],
      ['failed', undefined, 'step approval timed out after 60000 ms waiting for signal approved'],
    ]);
    expect((await store.openAlerts()).map((a) => a.id)).toEqual(['t1:approval:step_error:wait-1']);
    // A signal now is refused: the task is not running.
    expect((await refusal(signal(store, 't1', { id: 'late' }))).message).toMatch(/task t1 is failed: signals are accepted only while a task is running$/);

    const retried = await store.retryStep({ lease: HELD, taskId: 't1', step: 'approval', now: T0 + 70_000, schedulerId: 'sched-1' });
    expect(retried.events.map((e) => [e.type, e.until])).toEqual([['step_waiting', T0 + 130_000]]);
    expect(await store.openAlerts()).toEqual([]);
    await store.expireStep('t1', 'approval', T0 + 130_000, EPOCH);
    expect((await store.openAlerts()).map((a) => a.id)).toEqual(['t1:approval:step_error:wait-2']);
  });

  it('a timed-out wait in a workflow that undoes itself: the steps that ran are compensated, the wait never', async () => {
    const store = new TaskStore(r(), ns());
    await waitingTask(store, 't2', 'compensate');
    const x = await store.expireStep('t2', 'approval', T0 + 60_010, EPOCH);
    expect(x.action).toBe('compensate');
    expect(x.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate' })]);
    const undone = await store.applyResult(ok('t2', 'reserve', 'inventory', T0 + 60_100, 'compensate'));
    if (!undone.applied) throw new Error('expected applied');
    expect(undone.transition.status).toBe('compensated');
    expect((await stepOf(store, 't2', 'approval')).compensation).toBeUndefined();
  });

  it('a cancel stops a wait at once; a signal then is refused', async () => {
    const store = new TaskStore(r(), ns());
    await waitingTask(store, 'c1', 'compensate');
    const c = await store.cancelTask({ lease: HELD, taskId: 'c1', reason: 'withdrawn', now: T0 + 50, schedulerId: 'sched-1' });
    expect(c.events[0]).toMatchObject({ type: 'step_abandoned', step: 'approval', reason: 'stopped waiting for signal approved: the task is being undone' });
    expect([...(await indexMap(r(), store, 'deadlines')).keys()]).toEqual(['c1|reserve']);
    expect((await refusal(signal(store, 'c1', { id: 'x' }))).message).toMatch(/task c1 is being undone: signals are accepted only while a task is running$/);
  });
});
