// Decision 0020 increment 3 on a real redis-server: the queued state machine. A step of a limited agent
// type waits `queued` with a ticket (its attempt, failure count and complete-by untouched), the limiter
// grants it, startQueued starts it with the granted complete-by (once: fenced by the ticket), its result
// releases the permit; a check re-sends a lost ticket; an undo dequeues a waiting step and queues the
// compensation; a late start is refused (LATE), a stale one says whether to release.
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { LimitCache, LimitStore, TaskStore, type Grant, type LimitConfig, type Transition } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-queued-test', (redis) => redis.set(HELD.key, HELD.token));
const T0 = 1_700_000_000_000;
let n = 0;
const ns = (): string => `q${process.pid}-${++n}`;

const plan = compilePlan(
  validateDefinition({
    name: 'w',
    steps: [
      { name: 'a', agent: 'inventory', budgetMs: 1_000, compensate: { agent: 'inventory' } },
      { name: 'b', agent: 'payment', budgetMs: 1_000, dependsOn: ['a'], ladder: { retries: 2, longBackoffMs: 5_000, maxFailures: 3, maxCircuitOpen: 2 }, giveUpAfterMs: 60_000, compensate: { agent: 'payment' } },
    ],
  }),
);

interface World {
  store: TaskStore;
  limits: LimitStore;
}

async function world(agentLimits: Record<string, LimitConfig>): Promise<World> {
  const namespace = ns();
  const limits = new LimitStore(r(), namespace);
  for (const [agent, l] of Object.entries(agentLimits)) await limits.set(agent, l, T0);
  const store = new TaskStore(r(), namespace, { limits: new LimitCache(limits, { refreshMs: 0 }) });
  return { store, limits };
}

const create = (w: World, taskId: string, input: unknown = {}, priority?: number) =>
  w.store.createTask({ lease: HELD, taskId, workflow: 'w', version: 1, input: encode(input), plan, onFailure: 'compensate', client: 'c1', now: T0, schedulerId: 's1', ...(priority ? { priority } : {}) });

const ok = (w: World, taskId: string, step: 'a' | 'b', attempt: number, now: number, kind: 'run' | 'compensate' = 'run') =>
  w.store.applyResult({ lease: HELD, taskId, step, kind, attempt, now, schedulerId: 's1', agentId: 'ag', agentType: step === 'a' ? 'inventory' : 'payment', outcome: { ok: true, output: encode({ done: step }) } });

/** Hands a transition's limiter requests to the limiters (what the scheduler's FlowControl does); returns the grants. */
async function toLimiters(w: World, t: Pick<Transition, 'limiter'>, now: number): Promise<Grant[]> {
  const grants: Grant[] = [];
  for (const [agent, ops] of t.limiter ?? []) {
    // A throttle pauses the agent type (these limits do not say pausePerKey).
    const reply = await w.limits.apply(agent, { release: ops.release.map((ticket) => ({ ticket })), dequeue: ops.dequeue, pause: (ops.pause ?? []).map((p) => ({ until: p.until })), queue: ops.queue }, now);
    grants.push(...reply.grants);
  }
  return grants;
}

const start = (w: World, g: Grant, now: number) =>
  w.store.startQueued({ lease: HELD, taskId: g.taskId, phase: g.phase, kind: g.kind, ticket: g.ticket, completeBy: g.completeBy, now, schedulerId: 's1' });

async function step(w: World, taskId: string, name: string) {
  const raw = await r().hget(w.store.keys.task(taskId), `s:${name}`);
  return JSON.parse(raw ?? '{}') as Record<string, unknown>;
}

async function member(w: World, taskId: string, name: string): Promise<number | null> {
  const s = await r().zscore(w.store.keys.forTask(taskId).deadlines, `${taskId}|${name}`);
  return s === null ? null : Number(s);
}

async function throughA(w: World, taskId: string): Promise<Transition> {
  const res = await ok(w, taskId, 'a', 1, T0 + 10);
  if (!res.applied) throw new Error('a not applied');
  return res.transition;
}

describe('a task with no limit in its way', () => {
  it('starts its steps as before: no limiter field, no queued status', async () => {
    const w = await world({ shipping: { concurrency: 1 } });
    const c = await create(w, 't1');
    if (!c.created) throw new Error('not created');
    expect(c.transition.limiter).toBeUndefined();
    expect(c.transition.dispatch.map((d) => d.step)).toEqual(['a']);
    const t = await throughA(w, 't1');
    expect(t.limiter).toBeUndefined();
    expect(t.dispatch).toMatchObject([{ step: 'b', attempt: 1, completeBy: T0 + 10 + 1_000 }]);
  });
});

describe('a step of a limited agent type', () => {
  it('waits queued, is started with the granted complete-by, and releases its permit with its result', async () => {
    const w = await world({ payment: { concurrency: 1, key: ['customerId'] } });
    await create(w, 't1', { customerId: 'c-42' }, 2);
    await create(w, 't2', { customerId: 'c-43' });
    const t1 = await throughA(w, 't1');
    expect(t1.dispatch).toEqual([]);
    expect(t1.events.map((e) => e.type)).toEqual(['step_done', 'step_queued']);
    expect(t1.events[1]?.reason).toBe('waiting for a limit of payment (key c-42, priority 2)');
    const b = await step(w, 't1', 'b');
    expect(b).toMatchObject({ status: 'queued', attempt: 0, failureCount: 0, qn: 1, q: { t: 't1|b|run|1', k: 'c-42', p: 2, check: 1 } });
    expect(b['completeBy']).toBeUndefined();
    expect(await member(w, 't1', 'b')).toBe(T0 + 10 + 10_000);
    // The task's view says for what it waits (decision 0020 §6).
    expect((await w.store.getTask('t1'))?.steps.find((s) => s.name === 'b')).toMatchObject({ status: 'queued', queue: { agent: 'payment', key: 'c-42', priority: 2, since: T0 + 10, firstAt: T0 + 10, why: 'limit' } });
    expect([...(t1.limiter ?? [])]).toEqual([['payment', { queue: [{ ticket: 't1|b|run|1', taskId: 't1', phase: 'b', kind: 'run', key: 'c-42', priority: 2, firstAt: T0 + 10, budgetMs: 1_000 }], release: [], dequeue: [] }]]);

    const g1 = await toLimiters(w, t1, T0 + 20);
    expect(g1).toMatchObject([{ ticket: 't1|b|run|1', completeBy: T0 + 20 + 1_000 }]);
    const t2 = await throughA(w, 't2');
    expect(await toLimiters(w, t2, T0 + 25)).toEqual([]); // concurrency 1: t2 waits

    const s1 = await start(w, g1[0]!, T0 + 30);
    if (!s1.started) throw new Error(`not started: ${JSON.stringify(s1)}`);
    expect(s1.transition.dispatch).toMatchObject([{ step: 'b', attempt: 1, completeBy: T0 + 1_020 }]);
    expect(s1.transition.events).toMatchObject([{ type: 'step_started', step: 'b', attempt: 1, reason: '(waited 0.0 s for a limit of payment)' }]);
    expect(await step(w, 't1', 'b')).toMatchObject({ status: 'processing', attempt: 1, completeBy: T0 + 1_020, waitedMs: 20, permit: { t: 't1|b|run|1', g: 'payment', k: 'c-42', a: 1 } });
    expect(await member(w, 't1', 'b')).toBe(T0 + 1_020);
    // The same grant started again (another scheduler, a redelivery): stale, and its permit must stay.
    expect(await start(w, g1[0]!, T0 + 31)).toMatchObject({ started: false, why: 'stale', release: false });

    const done = await ok(w, 't1', 'b', 1, T0 + 40);
    if (!done.applied) throw new Error('b not applied');
    expect([...(done.transition.limiter ?? [])]).toEqual([['payment', { queue: [], release: ['t1|b|run|1'], dequeue: [] }]]);
    const g2 = await toLimiters(w, done.transition, T0 + 41);
    expect(g2).toMatchObject([{ ticket: 't2|b|run|1' }]);
    // The grant of an attempt that reported is dead: stale with release.
    expect(await start(w, g1[0]!, T0 + 42)).toMatchObject({ started: false, why: 'stale', release: true });
    // A redelivered result of that attempt is stale and frees its permit again (Q12).
    expect(await ok(w, 't1', 'b', 1, T0 + 43)).toMatchObject({ applied: false, release: [{ agent: 'payment', ticket: 't1|b|run|1' }] });
  });

  it('is refused a start too close to its granted complete-by (LATE), writing nothing', async () => {
    const w = await world({ payment: { concurrency: 1 } });
    await create(w, 't1');
    const [g] = await toLimiters(w, await throughA(w, 't1'), T0 + 20);
    expect(await start(w, g!, g!.completeBy - 50)).toEqual({ started: false, why: 'late' });
    expect(await step(w, 't1', 'b')).toMatchObject({ status: 'queued', attempt: 0 });
  });

  it('is checked at its member without counting a failure, the check backing off and re-sending its ticket', async () => {
    const w = await world({ payment: { concurrency: 1 } });
    await create(w, 't1');
    await throughA(w, 't1');
    expect((await w.store.expireStep('t1', 'b', T0 + 5_000, 1)).action).toBe('noop'); // not due yet
    const x = await w.store.expireStep('t1', 'b', T0 + 10_010, 1);
    expect(x.action).toBe('requeue');
    expect(x.limiter?.get('payment')?.queue).toMatchObject([{ ticket: 't1|b|run|1', firstAt: T0 + 10 }]);
    expect(await step(w, 't1', 'b')).toMatchObject({ status: 'queued', attempt: 0, failureCount: 0, q: { check: 2, at: T0 + 10_010 + 20_000 } });
    expect(await member(w, 't1', 'b')).toBe(T0 + 30_010);
  });

  it('is retried through the line after a failure: the attempt grows at the start, the give-up time moves by the wait', async () => {
    const w = await world({ payment: { concurrency: 1 } });
    await create(w, 't1');
    const [g] = await toLimiters(w, await throughA(w, 't1'), T0 + 20);
    const s = await start(w, g!, T0 + 20);
    if (!s.started) throw new Error('not started');
    const giveUpAt = (await step(w, 't1', 'b'))['giveUpAt'] as number;
    expect(giveUpAt).toBe(T0 + 20 + 60_000);
    // No result: the supervisor's sweep after complete-by retries it — through the line.
    const x = await w.store.expireStep('t1', 'b', T0 + 1_100, 1);
    expect(x.action).toBe('retry');
    expect(x.dispatch).toEqual([]);
    expect(await step(w, 't1', 'b')).toMatchObject({ status: 'queued', attempt: 1, failureCount: 1, q: { t: 't1|b|run|2', e: 'step_retried' } });
    const [g2] = await toLimiters(w, x, T0 + 3_100); // the first permit lapsed at its complete-by + 1 s
    expect(g2).toMatchObject({ ticket: 't1|b|run|2' });
    const s2 = await start(w, g2!, T0 + 3_100);
    if (!s2.started) throw new Error('not started');
    expect(s2.transition.events[0]).toMatchObject({ type: 'step_retried', attempt: 2 });
    expect(await step(w, 't1', 'b')).toMatchObject({ status: 'processing', attempt: 2, giveUpAt: giveUpAt + 2_000, waitedMs: 2_010 });
  });

  it('stops waiting when its task is cancelled, and the compensation of a limited agent type queues too', async () => {
    const w = await world({ payment: { concurrency: 1 }, inventory: { concurrency: 1 } });
    const c = await create(w, 't1');
    if (!c.created) throw new Error('not created');
    const [ga] = await toLimiters(w, c.transition, T0);
    const sa = await start(w, ga!, T0 + 1);
    if (!sa.started) throw new Error('a not started');
    const ta = await ok(w, 't1', 'a', 1, T0 + 10);
    if (!ta.applied) throw new Error('a not applied');
    expect(ta.transition.limiter?.get('inventory')?.release).toEqual(['t1|a|run|1']);
    expect(ta.transition.limiter?.get('payment')?.queue).toHaveLength(1);
    expect(await toLimiters(w, ta.transition, T0 + 11)).toMatchObject([{ ticket: 't1|b|run|1' }]); // granted, never started
    const cancel = await w.store.cancelTask({ lease: HELD, taskId: 't1', reason: 'by test', now: T0 + 20, schedulerId: 's1' });
    expect(cancel.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['step_abandoned', 'b', 'stopped waiting for a limit: the task is being undone'],
      ['compensating', undefined, 'by test'],
      ['step_queued', 'a', 'waiting for a limit of inventory (priority 3)'],
    ]);
    expect(cancel.limiter?.get('payment')?.dequeue).toEqual(['t1|b|run|1']);
    expect(cancel.limiter?.get('inventory')?.queue).toMatchObject([{ ticket: 't1|a|compensate|1', kind: 'compensate' }]);
    expect(await step(w, 't1', 'a')).toMatchObject({ status: 'compensating', comp: { queued: true } });
    // A result for the queued compensation is stale; its grant starts it.
    expect((await ok(w, 't1', 'a', 0, T0 + 21, 'compensate')).applied).toBe(false);
    const grants = await toLimiters(w, cancel, T0 + 30);
    expect(grants).toMatchObject([{ ticket: 't1|a|compensate|1' }]);
    const sc = await start(w, grants[0]!, T0 + 30);
    if (!sc.started) throw new Error('compensation not started');
    expect(sc.transition.dispatch).toMatchObject([{ step: 'a', kind: 'compensate', attempt: 1 }]);
    expect(sc.transition.events[0]).toMatchObject({ type: 'compensation_started' });
    const end = await ok(w, 't1', 'a', 1, T0 + 40, 'compensate');
    if (!end.applied) throw new Error('compensation not applied');
    expect(end.transition.status).toBe('cancelled');
    expect(end.transition.limiter?.get('inventory')?.release).toEqual(['t1|a|compensate|1']);
  });

  it('has nothing to retry while it waits, and is listed as a queue item by inFlight and queuedPhase', async () => {
    const w = await world({ payment: { concurrency: 1 } });
    await create(w, 't1');
    await throughA(w, 't1');
    await expect(w.store.retryStep({ lease: HELD, taskId: 't1', step: 'b', now: T0 + 20, schedulerId: 's1' })).rejects.toThrow(/waits for a limit of payment/);
    const t = await w.store.inFlight('t1');
    expect(t?.dispatch).toEqual([]);
    expect(t?.limiter?.get('payment')?.queue).toMatchObject([{ ticket: 't1|b|run|1', budgetMs: 1_000 }]);
    expect(await w.store.queuedPhase('t1', 'b', 'run', 't1|b|run|1')).toMatchObject({ agent: 'payment', item: { ticket: 't1|b|run|1' } });
    expect(await w.store.queuedPhase('t1', 'b', 'run', 't1|b|run|0')).toBeUndefined();
  });

  it('throttled by its service, pauses the limiter and goes back in line at its first wait, a refusal not a failure (Q6)', async () => {
    const w = await world({ payment: { concurrency: 1, key: ['customerId'] } });
    await create(w, 't1', { customerId: 'c-1' });
    const [g] = await toLimiters(w, await throughA(w, 't1'), T0 + 20);
    const s = await start(w, g!, T0 + 30);
    if (!s.started) throw new Error('not started');
    const res = await w.store.applyResult({
      lease: HELD, taskId: 't1', step: 'b', kind: 'run', attempt: 1, now: T0 + 40, schedulerId: 's1', agentId: 'ag', agentType: 'payment',
      outcome: { ok: false, message: '429 Too Many Requests', retryable: true, effect: 'none', throttledRetryAfterMs: 2_000 },
    });
    if (!res.applied) throw new Error('not applied');
    expect(res.transition.events).toMatchObject([{ type: 'step_queued', step: 'b', attempt: 1, reason: `throttled by payment: paused until ${T0 + 2_040} (Retry-After 2000 ms): 429 Too Many Requests` }]);
    const ops = res.transition.limiter?.get('payment');
    expect(ops).toMatchObject({ release: ['t1|b|run|1'], pause: [{ key: 'c-1', until: T0 + 2_040 }], queue: [{ ticket: 't1|b|run|2', firstAt: T0 + 10 }] });
    expect(await step(w, 't1', 'b')).toMatchObject({ status: 'queued', attempt: 1, failureCount: 0, circuitCount: 1, q: { why: 'throttled', e: 'step_retried' } });
    // The limiter holds it until the pause ends, then lets it go first.
    expect(await toLimiters(w, res.transition, T0 + 50)).toEqual([]);
    expect(await w.limits.pump('payment', T0 + 2_040)).toMatchObject({ grants: [{ ticket: 't1|b|run|2' }] });
  });

  it('as a fan-out element, waits with a ticket of its own and counts toward maxParallel (§2.7)', async () => {
    const w = await world({ shipping: { concurrency: 1 } });
    const fan = compilePlan(validateDefinition({ name: 'f', steps: [{ name: 'ship', agent: 'shipping', budgetMs: 1_000, forEach: 'items', maxParallel: 2 }] }));
    const c = await w.store.createTask({ lease: HELD, taskId: 'f1', workflow: 'f', version: 1, input: encode({ items: ['x', 'y', 'z'] }), plan: fan, onFailure: 'error', client: 'c1', now: T0, schedulerId: 's1' });
    if (!c.created) throw new Error('not created');
    expect(c.transition.dispatch).toEqual([]);
    expect(c.transition.limiter?.get('shipping')?.queue.map((q) => q.ticket)).toEqual(['f1|ship#0|run|1', 'f1|ship#1|run|1']);
    const [g] = await toLimiters(w, c.transition, T0 + 1);
    const s = await start(w, g!, T0 + 2);
    if (!s.started) throw new Error('element not started');
    expect(s.transition.dispatch).toMatchObject([{ step: 'ship', item: 0, count: 3, attempt: 1, completeBy: T0 + 1_001 }]);
    expect(s.transition.outputs.get('=ship#0')).toBeDefined();
    expect((await w.store.inFlight('f1'))?.limiter?.get('shipping')?.queue.map((q) => q.ticket)).toEqual(['f1|ship#1|run|1']);
  });

  it('renders its key as decision 0020 §1.1 says', async () => {
    const w = await world({ payment: { concurrency: 5, key: ['c'] } });
    const keyOf = async (taskId: string, c: unknown): Promise<string | undefined> => {
      await create(w, taskId, { c });
      return (await throughA(w, taskId)).limiter?.get('payment')?.queue[0]?.key;
    };
    expect(await keyOf('k1', 42)).toBe('42');
    expect(await keyOf('k2', true)).toBe('true');
    expect(await keyOf('k3', { x: 1 })).toBe('');
    expect(await keyOf('k4', 'x'.repeat(200))).toMatch(/^#[0-9a-f]{40}$/);
    expect(await keyOf('k5', 'a\nb')).toMatch(/^#[0-9a-f]{40}$/);
    expect(await keyOf('k6', 1.5)).toBe('1.5');
  });
});
