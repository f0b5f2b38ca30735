// Child tasks (decision 0019 §5, R14–R18, U2–U3′, U7–U8; increment 7) on a real redis-server: a child step
// dispatches operations on its child task (start, cancel, undo) that the caller applies to the child's
// bucket; the transition that finishes a linked child writes its notice, which the leader delivers to the
// parent (take → childEnded → drop), fenced by epoch and by the parent step's attempt.
import { describe, expect, it } from 'vitest';
import { decode as msgpackDecode } from 'msgpackr';
import { encode, isTriadError, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore, type ChildLink, type Transition } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-children-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
const ns = (): string => `c${process.pid}-${++nsCounter}`;
const T0 = 1_700_000_000_000;
const EPOCH = 1;
const HOLD = T0 + 3_600_000;

function plan(def: WorkflowDefinitionInput): PlanStep[] {
  return compilePlan(validateDefinition(def));
}

/** reserve → ship (a child task of `shipment` over the input's items) → notify */
const parentDef = (onFailure: 'error' | 'compensate' = 'compensate', timeoutMs?: number): WorkflowDefinitionInput => ({
    name: 'orders',
    onFailure,
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
      { name: 'ship', child: { workflow: 'shipment', input: 'items', ...(timeoutMs ? { timeoutMs } : {}) }, dependsOn: ['reserve'] },
      { name: 'notify', agent: 'mail', dependsOn: ['ship'] },
    ],
  });
const parentPlan = (onFailure: 'error' | 'compensate' = 'compensate', timeoutMs?: number) => plan(parentDef(onFailure, timeoutMs));

/** The child: one step that sends, undone by a recall. */
const childPlan = plan({ name: 'shipment', onFailure: 'compensate', steps: [{ name: 'send', agent: 'shipping', compensate: { agent: 'shipping' } }] });

async function created(store: TaskStore, taskId: string, p: PlanStep[], input: unknown, onFailure: 'error' | 'compensate' = 'compensate', now = T0) {
  const out = await store.createTask({ lease: HELD, taskId, workflow: 'orders', version: 1, input: encode(input), plan: p, onFailure, client: 'client-1', now, schedulerId: 'sched-1' });
  if (!out.created) throw new Error('expected a new task');
  return out.transition;
}

function ok(taskId: string, step: string, agent: string, attempt: number, now: number, kind: 'run' | 'compensate' = 'run', output: unknown = { step }) {
  return { lease: HELD, taskId, step, kind, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: agent, outcome: { ok: true as const, output: encode(output) } };
}

function failed(taskId: string, step: string, agent: string, attempt: number, now: number) {
  return { lease: HELD, taskId, step, kind: 'run' as const, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: agent, outcome: { ok: false as const, message: 'refused', retryable: false, effect: 'none' as const } };
}

async function applied(store: TaskStore, a: Parameters<TaskStore['applyResult']>[0]): Promise<Transition> {
  const out = await store.applyResult(a);
  if (!out.applied) throw new Error(`expected applied: ${out.reason}`);
  return out.transition;
}

const deadlines = (store: TaskStore) => indexMap(r(), store, 'deadlines');

async function step(store: TaskStore, taskId: string, name: string) {
  const s = (await store.getTask(taskId))?.steps.find((x) => x.name === name);
  if (!s) throw new Error(`no step ${name}`);
  return s;
}

const link = (kind: 'run' | 'compensate' = 'run', attempt = 1): ChildLink => ({ parentId: 'p1', parentStep: 'ship', kind, attempt, holdUntil: HOLD });

async function startChild(store: TaskStore, input: Uint8Array, now: number, childId = 'p1:ship:1') {
  return store.startChild({ lease: HELD, childId, link: link(), workflow: 'shipment', version: 1, plan: childPlan, onFailure: 'compensate', input, client: 'client-1', now, schedulerId: 'sched-1' });
}

/** The parent p1 with reserve done: its child step waits, its start dispatched. */
async function parentWaiting(store: TaskStore, onFailure: 'error' | 'compensate' = 'compensate', timeoutMs?: number) {
  await store.workflows.register(validateDefinition(parentDef(onFailure, timeoutMs)), T0);
  await created(store, 'p1', parentPlan(onFailure, timeoutMs), { items: [{ sku: 'a' }, { sku: 'b' }] }, onFailure);
  return applied(store, ok('p1', 'reserve', 'inventory', 1, T0 + 10));
}

describe('child tasks', () => {
  it('starts a child, and its completion completes the step with its output and starts what follows', async () => {
    const store = new TaskStore(r(), ns());
    const t = await parentWaiting(store);
    expect(t.dispatch).toEqual([{ step: 'ship', agent: '', kind: 'run', attempt: 1, completeBy: 0, needs: [], child: 'start', childId: 'p1:ship:1', sent: 1 }]);
    // The child's input is the slice at `items`, carried under `=ship`.
    const input = t.outputs.get('=ship');
    expect(msgpackDecode(input as Buffer)).toEqual([{ sku: 'a' }, { sku: 'b' }]);
    expect(t.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['step_done', 'reserve', undefined],
      ['step_waiting', 'ship', 'child task p1:ship:1 (shipment)'],
    ]);
    // The check member: the start is sent again after 5 s if no notice came.
    expect((await deadlines(store)).get('p1|ship')).toBe(T0 + 10 + 5_000);
    expect(await step(store, 'p1', 'ship')).toMatchObject({ kind: 'child', status: 'waiting', attempt: 1, child: { taskId: 'p1:ship:1', workflow: 'shipment', op: 'start' } });
    // The scheduler that takes a retry command finds the same operation, with the input.
    const again = await store.stepInFlight('p1', 'ship', 'run', 1);
    expect(again?.dispatch).toEqual(t.dispatch);
    expect(Buffer.from(again?.outputs.get('=ship') ?? [])).toEqual(Buffer.from(input ?? []));

    const started = await startChild(store, input as Uint8Array, T0 + 20);
    if (!started.applied) throw new Error('expected the child created');
    expect(started.transition.dispatch.map((d) => [d.step, d.agent])).toEqual([['send', 'shipping']]);
    expect(started.transition.client).toBe('client-1');
    expect((await store.getTask('p1:ship:1'))?.parent).toEqual({ taskId: 'p1', step: 'ship' });
    // A repeated start (a redelivery) creates nothing.
    expect(await startChild(store, input as Uint8Array, T0 + 21)).toEqual({ applied: false, action: 'exists', status: 'running' });

    const done = await applied(store, ok('p1:ship:1', 'send', 'shipping', 1, T0 + 30, 'run', { tracking: 'T1' }));
    expect(done.status).toBe('completed');
    // The notice is written with the end, due at once; the child stays in the finished indexes until HOLD.
    expect((await deadlines(store)).get('p1:ship:1|#parent')).toBe(T0 + 30);
    expect((await indexMap(r(), store, 'finished')).get('p1:ship:1')).toBe(HOLD);
    expect((await indexMap(r(), store, 'compact')).get('p1:ship:1')).toBe(HOLD);

    const delivered = await store.deliverNotice('p1:ship:1', T0 + 40, EPOCH);
    expect(delivered).toMatchObject({ parentId: 'p1', step: 'ship', childStatus: 'completed' });
    expect(delivered?.expiry.action).toBe('done');
    expect(delivered?.expiry.dispatch.map((d) => [d.step, d.agent])).toEqual([['notify', 'mail']]);
    const ship = await step(store, 'p1', 'ship');
    expect(ship).toMatchObject({ status: 'processed', effect: 'applied', output: { send: { tracking: 'T1' } } });
    const dl = await deadlines(store);
    expect(dl.has('p1|ship')).toBe(false);
    expect(dl.has('p1:ship:1|#parent')).toBe(false);
    // A repeated delivery (a leader that died before its drop) changes nothing.
    expect((await store.deliverNotice('p1:ship:1', T0 + 50, EPOCH))?.expiry.action).toBe('noop');
    expect((await step(store, 'p1', 'ship')).status).toBe('processed');

    await applied(store, ok('p1', 'notify', 'mail', 1, T0 + 60));
    expect((await store.getTask('p1'))?.status).toBe('completed');

    // Retention compacts them after the child's hold: the child keeps its link — shown, and a late start of the
    // step (its check re-sending it) finds its own child, not a task that took the id.
    expect(await store.compactFinished(HOLD, 10, EPOCH)).toEqual({ compacted: 2, skipped: 0 }); // the parent and the child
    const compacted = await store.getTask('p1:ship:1');
    expect(compacted).toMatchObject({ compacted: true, status: 'completed', parent: { taskId: 'p1', step: 'ship' } });
    expect(await startChild(store, input as Uint8Array, HOLD + 1)).toEqual({ applied: false, action: 'exists', status: 'completed' });
    // The notice it answered with is the one the parent had (its step moved on: nothing changes) …
    expect(await store.deliverNotice('p1:ship:1', HOLD + 2, EPOCH)).toMatchObject({ parentId: 'p1', step: 'ship', childStatus: 'completed' });
    // … and an undo (an operator's retry of the parent past its bound) is refused: nothing can undo it now.
    const undo = store.stopChild('undo', { lease: HELD, childId: 'p1:ship:1', link: link('compensate', 1), workflow: 'shipment', client: 'client-1', reason: 'the parent task is being undone', now: HOLD + 3, schedulerId: 'sched-1' });
    await expect(undo).rejects.toThrow(/compacted by retention; its effects can no longer be undone/);
    expect((await store.getTask('p1:ship:1'))?.status).toBe('completed');
  });

  it('a child that fails fails the step: the parent is undone, and the failed child is not undone twice', async () => {
    const store = new TaskStore(r(), ns());
    const t = await parentWaiting(store);
    await startChild(store, t.outputs.get('=ship') as Uint8Array, T0 + 20);
    const childEnd = await applied(store, failed('p1:ship:1', 'send', 'shipping', 1, T0 + 30));
    expect(childEnd.status).toBe('compensated');
    const d = await store.deliverNotice('p1:ship:1', T0 + 40, EPOCH);
    expect(d?.expiry.action).toBe('compensate');
    const ship = await step(store, 'p1', 'ship');
    expect(ship).toMatchObject({ status: 'failed', effect: 'none' });
    expect(ship.error).toBe('child task p1:ship:1 (shipment) ended compensated: step send failed permanently: refused');
    // Its effect is none (the child undid itself): the undo compensates reserve only.
    expect(d?.expiry.dispatch.map((x) => [x.step, x.kind, x.child])).toEqual([['reserve', 'compensate', undefined]]);
    const end = await applied(store, ok('p1', 'reserve', 'inventory', 1, T0 + 50, 'compensate'));
    expect(end.status).toBe('compensated');
  });

  it('cancelling the parent cancels a running child and waits for its notice before undoing anything else', async () => {
    const store = new TaskStore(r(), ns());
    const t = await parentWaiting(store);
    await startChild(store, t.outputs.get('=ship') as Uint8Array, T0 + 20);
    const cancel = await store.cancelTask({ lease: HELD, taskId: 'p1', reason: 'operator', now: T0 + 30, schedulerId: 'sched-1' });
    expect(cancel.dispatch).toEqual([{ step: 'ship', agent: '', kind: 'run', attempt: 1, completeBy: 0, needs: [], child: 'cancel', childId: 'p1:ship:1', sent: 2 }]);
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'waiting', child: { op: 'cancel' } });

    const stopped = await store.stopChild('cancel', { lease: HELD, childId: 'p1:ship:1', link: link(), workflow: 'shipment', client: 'client-1', reason: 'the parent task is being undone', now: T0 + 35, schedulerId: 'sched-1' });
    expect(stopped.applied && stopped.action).toBe('cancelling');
    // The child's own step is in flight: its undo waits for it; it completes, then is compensated.
    await applied(store, ok('p1:ship:1', 'send', 'shipping', 1, T0 + 40));
    const childEnd = await applied(store, ok('p1:ship:1', 'send', 'shipping', 1, T0 + 45, 'compensate'));
    expect(childEnd.status).toBe('cancelled');

    const d = await store.deliverNotice('p1:ship:1', T0 + 50, EPOCH);
    expect(d?.expiry.action).toBe('drain');
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'abandoned', effect: 'none' });
    expect(d?.expiry.dispatch.map((x) => [x.step, x.kind])).toEqual([['reserve', 'compensate']]);
    const end = await applied(store, ok('p1', 'reserve', 'inventory', 1, T0 + 60, 'compensate'));
    expect(end.status).toBe('cancelled');
  });

  it('undoes a completed child in its turn, and the parent waits for the child to be compensated', async () => {
    const store = new TaskStore(r(), ns());
    const t = await parentWaiting(store);
    await startChild(store, t.outputs.get('=ship') as Uint8Array, T0 + 20);
    await applied(store, ok('p1:ship:1', 'send', 'shipping', 1, T0 + 30));
    await store.deliverNotice('p1:ship:1', T0 + 40, EPOCH);
    const undo = await applied(store, failed('p1', 'notify', 'mail', 1, T0 + 50));
    expect(undo.status).toBe('compensating');
    expect(undo.dispatch).toEqual([{ step: 'ship', agent: '', kind: 'compensate', attempt: 1, completeBy: 0, needs: [], child: 'undo', childId: 'p1:ship:1', sent: 2 }]);
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'compensating', child: { op: 'undo' } });

    const stopped = await store.stopChild('undo', { lease: HELD, childId: 'p1:ship:1', link: link('compensate', 1), workflow: 'shipment', client: 'client-1', reason: 'the parent task is being undone', now: T0 + 55, schedulerId: 'sched-1' });
    expect(stopped.applied && stopped.action).toBe('undoing');
    if (!stopped.applied) throw new Error('expected applied');
    expect(stopped.transition.dispatch.map((x) => [x.step, x.kind])).toEqual([['send', 'compensate']]);
    // Revived: out of the finished indexes while it is undone.
    expect((await indexMap(r(), store, 'finished')).has('p1:ship:1')).toBe(false);
    const childEnd = await applied(store, ok('p1:ship:1', 'send', 'shipping', 1, T0 + 60, 'compensate'));
    expect(childEnd.status).toBe('compensated');

    const d = await store.deliverNotice('p1:ship:1', T0 + 70, EPOCH);
    expect(d?.expiry.action).toBe('compensated');
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'compensated' });
    expect(d?.expiry.dispatch.map((x) => [x.step, x.kind])).toEqual([['reserve', 'compensate']]);
    const end = await applied(store, ok('p1', 'reserve', 'inventory', 1, T0 + 80, 'compensate'));
    expect(end.status).toBe('compensated');
  });

  it('re-sends the current operation at the check, and a timeout cancels the child and ends the step in error', async () => {
    const store = new TaskStore(r(), ns());
    await parentWaiting(store, 'error', 8_000);
    const resend = await store.expireStep('p1', 'ship', T0 + 10 + 5_000, EPOCH);
    expect(resend.action).toBe('resend');
    expect(resend.dispatch).toEqual([{ step: 'ship', agent: '', kind: 'run', attempt: 1, completeBy: 0, needs: [], child: 'start', childId: 'p1:ship:1', sent: 2 }]);
    // The next check is the timeout (before the 60 s re-send).
    expect((await deadlines(store)).get('p1|ship')).toBe(T0 + 10 + 8_000);
    const timeout = await store.expireStep('p1', 'ship', T0 + 10 + 8_000, EPOCH);
    expect(timeout.action).toBe('timeout');
    expect(timeout.dispatch.map((d) => [d.child, d.sent])).toEqual([['cancel', 3]]);
    expect(timeout.events.map((e) => e.reason)).toEqual(['child task p1:ship:1 did not end within 8000 ms: cancelling it']);
    // The cancel finds no child (its start was lost): a tombstone, whose notice ends the wait.
    const tomb = await store.stopChild('cancel', { lease: HELD, childId: 'p1:ship:1', link: link(), workflow: 'shipment', client: 'client-1', reason: 'timed out', now: T0 + 8_020, schedulerId: 'sched-1' });
    expect(tomb.applied && tomb.action).toBe('tombstone');
    // A late start finds it and creates nothing.
    expect(await startChild(store, encode([]), T0 + 8_030)).toEqual({ applied: false, action: 'exists', status: 'cancelled' });
    const d = await store.deliverNotice('p1:ship:1', T0 + 8_040, EPOCH);
    expect(d?.expiry.action).toBe('error');
    const ship = await step(store, 'p1', 'ship');
    expect(ship).toMatchObject({ status: 'error', effect: 'none' });
    expect(ship.error).toBe('timed out: child task p1:ship:1 did not end within 8000 ms (child task p1:ship:1 (shipment) ended cancelled: cancelled before it started: timed out)');
    expect((await store.getTask('p1'))?.status).toBe('failed');
    expect((await store.openAlerts()).map((a) => [a.kind, a.step])).toEqual([['step_error', 'ship']]);
  });

  it('a parent that fails cancels its running child, and records how it ended', async () => {
    const store = new TaskStore(r(), ns());
    const def: WorkflowDefinitionInput = {
      name: 'orders',
      onFailure: 'error',
      steps: [
        { name: 'ship', child: { workflow: 'shipment' } },
        { name: 'check', agent: 'fraud' },
      ],
    };
    await store.workflows.register(validateDefinition(def), T0);
    const p = plan(def);
    const t = await created(store, 'p1', p, { n: 1 }, 'error');
    expect(t.dispatch.map((d) => [d.step, d.child])).toEqual([['ship', 'start'], ['check', undefined]]);
    // The whole input: no slice is carried.
    expect(t.outputs.has('=ship')).toBe(false);
    await startChild(store, t.input as Uint8Array, T0 + 5);
    const end = await applied(store, failed('p1', 'check', 'fraud', 1, T0 + 10));
    expect(end.status).toBe('failed');
    expect(end.dispatch.map((d) => [d.step, d.child])).toEqual([['ship', 'cancel']]);
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'abandoned', effect: 'unknown' });
    // A lost cancel is sent again at the check, although the parent failed.
    expect((await store.expireStep('p1', 'ship', T0 + 10 + 5_000, EPOCH)).dispatch.map((d) => d.child)).toEqual(['cancel']);
    expect((await store.stepInFlight('p1', 'ship', 'run', 1))?.dispatch.map((d) => d.child)).toEqual(['cancel']);
    await store.stopChild('cancel', { lease: HELD, childId: 'p1:ship:1', link: link(), workflow: 'shipment', client: 'client-1', reason: 'the parent failed', now: T0 + 5_020, schedulerId: 'sched-1' });
    await applied(store, failed('p1:ship:1', 'send', 'shipping', 1, T0 + 5_030));
    const d = await store.deliverNotice('p1:ship:1', T0 + 5_040, EPOCH);
    expect(d?.expiry.action).toBe('ended');
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'abandoned', effect: 'none' });
    expect((await deadlines(store)).has('p1|ship')).toBe(false);
    expect((await store.getTask('p1'))?.status).toBe('failed');
    // An operator's retry starts a new child (attempt 2).
    const retry = await store.retryStep({ lease: HELD, taskId: 'p1', now: T0 + 6_000, schedulerId: 'sched-1' });
    expect(retry.dispatch.map((x) => [x.step, x.child, x.childId])).toEqual([['ship', 'start', 'p1:ship:2'], ['check', undefined, undefined]]);
  });

  it('fences notices: a stale epoch writes nothing, an old child is a noop, and an id taken by another task is refused', async () => {
    const store = new TaskStore(r(), ns());
    const t = await parentWaiting(store);
    await startChild(store, t.outputs.get('=ship') as Uint8Array, T0 + 20);
    await applied(store, ok('p1:ship:1', 'send', 'shipping', 1, T0 + 30));
    await store.expireStep('p1', 'other', T0, 5); // a newer leader (epoch 5) acted in the parent's bucket
    await store.expireStep('p1:ship:1', 'other', T0, 5); // and in the child's
    const refused = await store.deliverNotice('p1:ship:1', T0 + 40, 4).catch((e: unknown) => e);
    expect(isTriadError(refused, 'STALE')).toBe(true);
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'waiting' });
    expect((await deadlines(store)).get('p1:ship:1|#parent')).toBe(T0 + 30);
    // The current leader delivers it.
    expect((await store.deliverNotice('p1:ship:1', T0 + 41, 5))?.expiry.action).toBe('done');

    const taken = await store
      .startChild({ lease: HELD, childId: 'p1:ship:1', link: { ...link(), parentId: 'p2' }, workflow: 'shipment', version: 1, plan: childPlan, input: encode(null), client: 'client-1', now: T0 + 50, schedulerId: 'sched-1' })
      .catch((e: unknown) => e);
    expect(isTriadError(taken, 'INVALID_STATE')).toBe(true);
    expect((taken as Error).message).toContain('task id p1:ship:1 is taken by a task that is not the child of step ship of task p2');
  });

  it('a child id a client already took fails the step at once (childRefused): the task is undone, nothing waits', async () => {
    const store = new TaskStore(r(), ns());
    const t = await parentWaiting(store);
    // A client submitted a task under the id the child would have.
    await created(store, 'p1:ship:1', childPlan, {}, 'compensate', T0 + 15);
    const taken = await startChild(store, t.outputs.get('=ship') as Uint8Array, T0 + 20).catch((e: unknown) => e);
    expect(isTriadError(taken, 'INVALID_STATE')).toBe(true);
    const refused = await store.childRefused({ lease: HELD, taskId: 'p1', step: 'ship', attempt: 1, childId: 'p1:ship:1', reason: (taken as Error).message, now: T0 + 21, schedulerId: 'sched-1' });
    if (!refused.applied) throw new Error(`expected applied: ${refused.reason}`);
    expect(refused.action).toBe('compensate');
    expect(refused.transition.events.map((e) => [e.type, e.step])).toEqual([
      ['step_failed', 'ship'],
      ['compensating', undefined],
      ['compensation_started', 'reserve'],
    ]);
    expect(refused.transition.events[0]?.reason).toMatch(/^child task p1:ship:1 cannot be created: .*task id p1:ship:1 is taken by a task that is not the child of step ship of task p1/);
    expect(refused.transition.dispatch.map((d) => [d.step, d.kind])).toEqual([['reserve', 'compensate']]);
    expect(await step(store, 'p1', 'ship')).toMatchObject({ status: 'failed', effect: 'none' });
    expect((await deadlines(store)).has('p1|ship')).toBe(false);
    // Told twice (a redelivery): the step no longer waits for that start.
    expect(await store.childRefused({ lease: HELD, taskId: 'p1', step: 'ship', attempt: 1, childId: 'p1:ship:1', reason: 'again', now: T0 + 22, schedulerId: 'sched-1' })).toMatchObject({ applied: false });
    // The client's task is untouched.
    expect((await store.getTask('p1:ship:1'))?.parent).toBeUndefined();
  });

  it('a child whose workflow cannot be started is a cancelled stub that fails the step with the reason', async () => {
    const store = new TaskStore(r(), ns());
    await parentWaiting(store, 'error');
    const stub = await store.startChild({ lease: HELD, childId: 'p1:ship:1', link: link(), workflow: 'shipment', version: 0, input: encode(null), client: 'client-1', reason: 'workflow shipment is not registered', now: T0 + 20, schedulerId: 'sched-1' });
    expect(stub.applied && stub.action).toBe('stub');
    const d = await store.deliverNotice('p1:ship:1', T0 + 30, EPOCH);
    expect(d?.expiry.action).toBe('error');
    expect((await step(store, 'p1', 'ship')).error).toBe('child task p1:ship:1 (shipment) ended cancelled: could not start: workflow shipment is not registered');
  });
});
