// Decision 0024 on a real redis-server: a client's active tasks per bucket are capped (its share of
// maxActive); a task over the cap is stored, received and waits, in arrival order; every way a task ends
// (completed, failed by a give-up or its deadline, cancelled, undone) admits the next waiting task of its
// client and bucket; a waiting task that is cancelled or expires leaves the queue; an admitted task is
// started once, by the scheduler or — after a crash between the two — by the leader supervisor; and the
// set of active tasks is what the tasks' statuses say after all of it.
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { ADMIT_STEP, BUCKETS, TaskStore, admissionKeys, bucketOf, type Transition } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-admission-test', (redis) => redis.set(HELD.key, HELD.token));
const T0 = 1_700_000_000_000;
const input = encode({ orderId: 'o-1' });
/** A share of 2 per bucket. */
const MAX = 2 * BUCKETS;

let nsCounter = 0;
function ns(): string {
  nsCounter++;
  return `adm${process.pid}-${nsCounter}`;
}

const one: PlanStep[] = compilePlan(validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', retry: { maxAttempts: 1 } }] }));
const undoable: PlanStep[] = compilePlan(validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', compensate: { agent: 'x' } }, { name: 'b', agent: 'x', dependsOn: ['a'] }] }));

/** `n` task ids of one bucket (the same one for the same prefix). */
function sameBucket(prefix: string, n: number, bucket = bucketOf(`${prefix}-0`)): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (bucketOf(`${prefix}-${i}`) === bucket) out.push(`${prefix}-${i}`);
  return out;
}

async function create(store: TaskStore, taskId: string, o: { plan?: PlanStep[]; client?: string; now?: number; deadlineMs?: number; onFailure?: 'error' | 'compensate' } = {}): Promise<Transition> {
  const c = await store.createTask({
    lease: HELD,
    taskId,
    workflow: 'w',
    version: 1,
    input,
    plan: o.plan ?? one,
    onFailure: o.onFailure ?? 'error',
    client: o.client ?? 'alice',
    maxActive: MAX,
    now: o.now ?? T0,
    schedulerId: 's1',
    ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}),
  });
  if (!c.created) throw new Error(`${taskId} exists`);
  return c.transition;
}

function complete(store: TaskStore, taskId: string, step = 'a', now = T0 + 10) {
  return store.applyResult({ lease: HELD, taskId, step, kind: 'run', attempt: 1, now, schedulerId: 's1', agentId: 'g', agentType: 'x', outcome: { ok: true, output: encode({ step }) } });
}

function admitted(t: { applied: true; transition: Transition } | { applied: false }): string[] {
  if (!t.applied) throw new Error('not applied');
  return t.transition.admit ?? [];
}

/** Every task of `ids` whose status is running or compensating and that does not wait: what the set must hold. */
async function expectedActive(store: TaskStore, ids: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const id of ids) {
    const [status, adm] = await r().hmget(store.keys.task(id), 'status', 'adm');
    if ((status === 'running' || status === 'compensating') && adm !== 'w') out.push(id);
  }
  return out.sort();
}

async function setOf(store: TaskStore, id: string, client = 'alice'): Promise<{ active: string[]; waiting: string[] }> {
  const k = admissionKeys(store.keys.forTask(id), client);
  return { active: (await r().smembers(k.active)).sort(), waiting: await r().zrange(k.waiting, 0, -1) };
}

describe('admission of a client\'s tasks (decision 0024)', () => {
  it('starts tasks up to the share, queues the rest in arrival order, and admits one per task that ends', async () => {
    const store = new TaskStore(r(), ns());
    const [t1, t2, t3, t4, t5] = sameBucket('cap', 5) as [string, string, string, string, string];
    expect((await create(store, t1)).dispatch).toHaveLength(1);
    expect((await create(store, t2)).dispatch).toHaveLength(1);
    const w3 = await create(store, t3, { now: T0 + 1 });
    expect(w3.dispatch).toEqual([]);
    expect(w3.events.map((e) => e.type)).toEqual(['received']);
    expect(w3.events[0]?.reason).toMatch(/waiting for admission: client alice has 2 active tasks/);
    await create(store, t4, { now: T0 + 2 });
    await create(store, t5, { now: T0 + 3 });
    // Another client, in the same bucket, is not held back by alice's queue.
    expect((await create(store, sameBucket('cap', 6)[5] as string, { client: 'bob' })).dispatch).toHaveLength(1);
    expect(await setOf(store, t1)).toEqual({ active: [t1, t2].sort(), waiting: [t3, t4, t5] });
    const view = await store.getTask(t3);
    expect(view?.status).toBe('running');
    expect(view?.admission).toBe('waiting');
    expect(view?.steps.map((x) => x.status)).toEqual(['pending']);

    // t1 completes: t3 (the oldest waiting) is admitted, with its member due after the grace.
    expect(admitted(await complete(store, t1))).toEqual([t3]);
    const b = store.keys.forTask(t3);
    expect(await r().zscore(b.deadlines, `${t3}|${ADMIT_STEP}`)).toBe(String(T0 + 10 + 5000));
    const s = await store.admitTask({ lease: HELD, taskId: t3, now: T0 + 11, schedulerId: 's1' });
    expect(s.started).toBe(true);
    if (s.started) {
      expect(s.transition.dispatch.map((d) => d.step)).toEqual(['a']);
      expect(s.transition.events.map((e) => e.type)).toEqual(['step_started']);
    }
    expect(await r().zscore(b.deadlines, `${t3}|${ADMIT_STEP}`)).toBeNull();
    // Started once: a second call (the supervisor's, a retry) starts nothing.
    expect(await store.admitTask({ lease: HELD, taskId: t3, now: T0 + 12, schedulerId: 's1' })).toEqual({ started: false, reason: 'the task is running, not waiting to be started' });
    expect(await setOf(store, t1)).toEqual({ active: [t2, t3].sort(), waiting: [t4, t5] });

    // A waiting task that is cancelled leaves the queue and admits nothing.
    const c = await store.cancelTask({ lease: HELD, taskId: t4, reason: 'no', now: T0 + 20, schedulerId: 's1' });
    expect(c.status).toBe('cancelled');
    expect(c.admit).toBeUndefined();
    expect(await setOf(store, t1)).toEqual({ active: [t2, t3].sort(), waiting: [t5] });
    expect(await expectedActive(store, [t1, t2, t3, t4, t5])).toEqual([t2, t3].sort());
    expect(await store.admission('alice')).toEqual({ active: 2, waiting: 1 });
  });

  it('admits on every way a task ends: a give-up, its deadline, a cancel, an undo', async () => {
    const store = new TaskStore(r(), ns());
    const ids = sameBucket('ends', 8);
    const [a1, a2, w1, w2, w3, w4] = ids as [string, string, string, string, string, string];
    await create(store, a1, { deadlineMs: 1000 });
    await create(store, a2, { plan: undoable, onFailure: 'compensate' });
    for (const [i, id] of [w1, w2, w3, w4].entries()) await create(store, id, { now: T0 + 1 + i, plan: undoable, onFailure: 'compensate' });

    // a1's deadline passes (the supervisor): it fails, w1 is admitted (the supervisor starts it itself).
    const x = await store.expireTask(a1, T0 + 2000, 1);
    expect(x.action).toBe('error');
    expect(x.admit).toEqual([w1]);
    const started = await store.admitAsLeader(w1, T0 + 2001, 1);
    expect(started.action).toBe('admit');
    expect(started.dispatch.map((d) => [d.step, d.attempt])).toEqual([['a', 1]]);

    // a2 is cancelled: its step a is in flight, so it is undone after it; its end admits w2.
    const cancel = await store.cancelTask({ lease: HELD, taskId: a2, reason: 'stop', now: T0 + 3000, schedulerId: 's1' });
    expect(cancel.status).toBe('compensating');
    expect(cancel.admit).toBeUndefined();
    const late = await complete(store, a2, 'a', T0 + 3001);
    if (!late.applied) throw new Error('not applied');
    // a's compensation starts; its result ends the undo: cancelled → w2 admitted.
    const comp = late.transition.dispatch.find((d) => d.kind === 'compensate');
    expect(comp?.step).toBe('a');
    const undone = await store.applyResult({ lease: HELD, taskId: a2, step: 'a', kind: 'compensate', attempt: comp?.attempt ?? 1, now: T0 + 3002, schedulerId: 's1', agentId: 'g', agentType: 'x', outcome: { ok: true, output: encode(null) } });
    if (!undone.applied) throw new Error('not applied');
    expect(undone.transition.status).toBe('cancelled');
    expect(undone.transition.admit).toEqual([w2]);
    const s2 = await store.admitTask({ lease: HELD, taskId: w2, now: T0 + 3003, schedulerId: 's1' });
    expect(s2.started).toBe(true);

    // w1 completes both steps: completed → w3 admitted; then w3 is not started by its scheduler (a crash).
    await complete(store, w1, 'a', T0 + 4000);
    const done = await complete(store, w1, 'b', T0 + 4001);
    expect(admitted(done)).toEqual([w3]);
    // w2's step a fails for good: its undo has nothing to compensate, it ends compensated → w4 admitted.
    const failed = await store.applyResult({ lease: HELD, taskId: w2, step: 'a', kind: 'run', attempt: 1, now: T0 + 4002, schedulerId: 's1', agentId: 'g', agentType: 'x', outcome: { ok: false, message: 'card declined', retryable: false, effect: 'none' } });
    if (!failed.applied) throw new Error('not applied');
    expect(failed.transition.status).toBe('compensated');
    expect(failed.transition.admit).toEqual([w4]);

    // The supervisor finds w3's and w4's members due after the grace and starts them.
    const due = (await store.expiredSteps(T0 + 4001 + 5000, 100)).filter((e) => e.step === ADMIT_STEP).map((e) => e.taskId);
    expect(due).toEqual([w3]);
    expect((await store.admitAsLeader(w3, T0 + 9002, 1)).dispatch.map((d) => d.step)).toEqual(['a']);
    expect((await store.admitAsLeader(w3, T0 + 9003, 1)).action).toBe('noop');
    // A stale epoch writes nothing.
    await r().set(store.keys.forTask(w4).epoch, 5);
    await expect(store.admitAsLeader(w4, T0 + 9004, 1)).rejects.toThrow();
    expect((await store.admitAsLeader(w4, T0 + 9005, 5)).action).toBe('admit');

    expect((await setOf(store, a1)).active).toEqual(await expectedActive(store, ids));
    expect(await store.admission('alice')).toEqual({ active: 2, waiting: 0 });
  });

  it('a waiting task whose own deadline passes fails and leaves the queue', async () => {
    const store = new TaskStore(r(), ns());
    const [a1, a2, w1, w2] = sameBucket('dl', 4) as [string, string, string, string];
    await create(store, a1);
    await create(store, a2);
    await create(store, w1, { deadlineMs: 500, now: T0 + 1 });
    await create(store, w2, { now: T0 + 2 });
    const x = await store.expireTask(w1, T0 + 600, 1);
    expect(x.action).toBe('error');
    expect(x.admit).toBeUndefined();
    expect(await setOf(store, a1)).toEqual({ active: [a1, a2].sort(), waiting: [w2] });
    // A task admitted and then ended before anyone started it frees its place; its member is dropped.
    expect(admitted(await complete(store, a1))).toEqual([w2]);
    await store.cancelTask({ lease: HELD, taskId: w2, reason: 'never mind', now: T0 + 700, schedulerId: 's1' });
    expect(await store.admitTask({ lease: HELD, taskId: w2, now: T0 + 701, schedulerId: 's1' })).toMatchObject({ started: false });
    expect(await r().zscore(store.keys.forTask(w2).deadlines, `${w2}|${ADMIT_STEP}`)).toBeNull();
    expect(await setOf(store, a1)).toEqual({ active: [a2], waiting: [] });
  });

  it('a task created without a cap (or an older one) is never counted, and its end costs nothing more than a check', async () => {
    const store = new TaskStore(r(), ns());
    const [a1] = sameBucket('nocap', 1) as [string];
    const c = await store.createTask({ lease: HELD, taskId: a1, workflow: 'w', version: 1, input, plan: one, onFailure: 'error', client: 'alice', now: T0, schedulerId: 's1' });
    expect(c.created && c.transition.dispatch).toHaveLength(1);
    expect(await setOf(store, a1)).toEqual({ active: [], waiting: [] });
    expect(admitted(await complete(store, a1))).toEqual([]);
  });
});
