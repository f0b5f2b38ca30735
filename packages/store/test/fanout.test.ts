// Fan-out over a list (decision 0019 §4, R10–R13, U4–U6; increment 6) on a real redis-server: the list is
// located when the step becomes ready and snapshotted; elements start in index order, at most maxParallel
// at once, each its own phase (attempt, ladder, deadline member `<task>|<step>#<i>`, compensation); the
// step's output is the array of the element outputs in index order, assembled from their bytes.
import { describe, expect, it } from 'vitest';
import { encode, isTriadError, unpackTrusted as decode, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore, type Transition } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-fanout-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
const ns = (): string => `f${process.pid}-${++nsCounter}`;
const T0 = 1_700_000_000_000;
const EPOCH = 1;

const definitions = new Map<PlanStep[], WorkflowDefinitionInput>();
function plan(def: WorkflowDefinitionInput): PlanStep[] {
  const p = compilePlan(validateDefinition(def));
  definitions.set(p, def);
  return p;
}

async function created(store: TaskStore, taskId: string, p: PlanStep[], input: unknown, onFailure: 'error' | 'compensate' = 'error', now = T0) {
  // Registered, as a scheduler's would be: a retry command reads the task's pinned plan (stepInFlight).
  await store.workflows.register(validateDefinition(definitions.get(p)), now);
  const out = await store.createTask({ lease: HELD, taskId, workflow: 'w', version: 1, input: encode(input), plan: p, onFailure, client: 'client-1', now, schedulerId: 'sched-1' });
  if (!out.created) throw new Error('expected a new task');
  return out.transition;
}

function result(taskId: string, step: string, agent: string, attempt: number, now: number, item: number | undefined, output: unknown, kind: 'run' | 'compensate' = 'run') {
  return {
    lease: HELD,
    taskId,
    step,
    kind,
    attempt,
    now,
    schedulerId: 'sched-1',
    agentId: 'agent-1',
    agentType: agent,
    ...(item !== undefined ? { item } : {}),
    outcome: { ok: true as const, output: encode(output) },
  };
}

function failed(taskId: string, step: string, agent: string, attempt: number, now: number, item: number, message: string, retryable = false) {
  return {
    lease: HELD,
    taskId,
    step,
    kind: 'run' as const,
    attempt,
    now,
    schedulerId: 'sched-1',
    agentId: 'agent-1',
    agentType: agent,
    item,
    outcome: { ok: false as const, message, retryable, effect: 'unknown' as const },
  };
}

async function applied(store: TaskStore, args: Parameters<TaskStore['applyResult']>[0]): Promise<Transition> {
  const out = await store.applyResult(args);
  if (!out.applied) throw new Error(`expected applied, got: ${out.reason}`);
  return out.transition;
}

const deadlines = (store: TaskStore) => indexMap(r(), store, 'deadlines');

/** The element requests a transition dispatched: [step, item, count, kind, attempt, the element's value]. */
function elements(t: Transition): [string, number | undefined, number | undefined, string, number, unknown][] {
  return t.dispatch.map((d) => {
    const v = d.item !== undefined ? t.outputs.get(`=${d.step}#${d.item}`) : undefined;
    return [d.step, d.item, d.count, d.kind, d.attempt, v ? decode(v) : undefined];
  });
}

async function stepOf(store: TaskStore, taskId: string, name: string) {
  const s = (await store.getTask(taskId))?.steps.find((x) => x.name === name);
  if (!s) throw new Error(`no step ${name}`);
  return s;
}

async function record(store: TaskStore, taskId: string, field: string): Promise<Record<string, unknown>> {
  return JSON.parse((await r().hget(store.keys.task(taskId), field)) ?? '{}') as Record<string, unknown>;
}

/** reserve → ship (over input.items, 2 at once, at most 5) → notify */
const shipPlan = (extra: Partial<{ maxParallel: number; maxItems: number; ladder: { retries: number; maxFailures: number; longBackoffMs: number } }> = {}) =>
  plan({
    name: 'w',
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
      {
        name: 'ship',
        agent: 'shipping',
        dependsOn: ['reserve'],
        needs: ['reserve'],
        forEach: 'items',
        maxParallel: extra.maxParallel ?? 2,
        maxItems: extra.maxItems ?? 5,
        compensate: { agent: 'shipping' },
        ...(extra.ladder ? { ladder: extra.ladder } : {}),
      },
      { name: 'notify', agent: 'mailer', dependsOn: ['ship'], needs: ['ship'] },
    ],
  });

const ITEMS = [{ sku: 'a' }, { sku: 'b' }, 'c', [1, null], null];

describe('fan-out', () => {
  it('starts elements in index order, at most maxParallel at once, and assembles their outputs in index order', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'o1', shipPlan(), { items: ITEMS });
    const started = await applied(store, result('o1', 'reserve', 'inventory', 1, T0 + 10, undefined, { id: 'r1' }));
    expect(elements(started)).toEqual([
      ['ship', 0, 5, 'run', 1, { sku: 'a' }],
      ['ship', 1, 5, 'run', 1, { sku: 'b' }],
    ]);
    // The element's request carries the step's needs like any request.
    expect(started.dispatch[0]?.needs).toEqual(['reserve']);
    expect(decode(started.outputs.get('reserve') as Uint8Array)).toEqual({ id: 'r1' });
    expect(started.events.map((e) => [e.type, e.step, e.item])).toEqual([
      ['step_done', 'reserve', undefined],
      ['step_started', 'ship', undefined],
      ['step_started', 'ship', 0],
      ['step_started', 'ship', 1],
    ]);
    expect([...(await deadlines(store)).keys()].sort()).toEqual(['o1|ship#0', 'o1|ship#1']);

    // Element 1 ends first: element 2 starts (the slot it freed), never a third at once.
    const e1 = await applied(store, result('o1', 'ship', 'shipping', 1, T0 + 20, 1, 'out-1'));
    expect(elements(e1)).toEqual([['ship', 2, 5, 'run', 1, 'c']]);
    const e0 = await applied(store, result('o1', 'ship', 'shipping', 1, T0 + 30, 0, 'out-0'));
    expect(elements(e0)).toEqual([['ship', 3, 5, 'run', 1, [1, null]]]);
    expect(await record(store, 'o1', 's:ship')).toMatchObject({ status: 'processing', fe: { n: 5, next: 4, done: 2, live: [2, 3] } });
    const e3 = await applied(store, result('o1', 'ship', 'shipping', 1, T0 + 40, 3, { n: 3 }));
    expect(elements(e3)).toEqual([['ship', 4, 5, 'run', 1, null]]);
    await applied(store, result('o1', 'ship', 'shipping', 1, T0 + 50, 4, null));
    // The last element: the step is processed, its output the array of theirs, and notify starts with it.
    const last = await applied(store, result('o1', 'ship', 'shipping', 1, T0 + 60, 2, 'out-2'));
    expect(last.events.map((e) => [e.type, e.step, e.item])).toEqual([
      ['step_done', 'ship', 2],
      ['step_done', 'ship', undefined],
      ['step_started', 'notify', undefined],
    ]);
    const out = last.outputs.get('ship') as Uint8Array;
    expect(decode(out)).toEqual(['out-0', 'out-1', 'out-2', { n: 3 }, null]);
    // Bytes, not a re-encoding: the array header and each element's bytes as the agent sent them.
    expect(Buffer.from(out)).toEqual(Buffer.concat([Buffer.from([0x95]), ...['out-0', 'out-1', 'out-2', { n: 3 }, null].map((o) => Buffer.from(encode(o)))]));
    expect(await stepOf(store, 'o1', 'ship')).toMatchObject({ status: 'processed', output: ['out-0', 'out-1', 'out-2', { n: 3 }, null], effect: 'applied' });
    expect([...(await deadlines(store)).keys()]).toEqual(['o1|notify']);
  });

  it('a completed task\'s fan-out step keeps its element counts once compacted (from its output)', async () => {
    const store = new TaskStore(r(), ns());
    await store.fenceBuckets(EPOCH);
    await created(store, 'o9', plan({ name: 'w', steps: [{ name: 'ship', agent: 'shipping', forEach: 'items' }] }), { items: ['a', 'b'] });
    await applied(store, result('o9', 'ship', 'shipping', 1, T0 + 10, 0, 'out-0'));
    await applied(store, result('o9', 'ship', 'shipping', 1, T0 + 20, 1, 'out-1'));
    expect(await stepOf(store, 'o9', 'ship')).toMatchObject({ status: 'processed', items: { count: 2, done: 2 } });
    expect(await store.compactFinished(T0 + 60_000, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    const compacted = await store.getTask('o9');
    expect(compacted?.compacted).toBe(true);
    expect(compacted?.steps[0]).toMatchObject({ status: 'processed', output: ['out-0', 'out-1'], items: { count: 2, pending: 0, running: 0, done: 2, failed: 0 } });
  });

  it('an empty list processes the step at once with the output []', async () => {
    const store = new TaskStore(r(), ns());
    const t = await created(store, 'o2', plan({ name: 'w', steps: [{ name: 'ship', agent: 'shipping', forEach: 'items' }, { name: 'notify', agent: 'mailer', dependsOn: ['ship'], needs: ['ship'] }] }), { items: [] });
    expect(t.events.map((e) => [e.type, e.step])).toEqual([
      ['received', undefined],
      ['step_started', 'ship'],
      ['step_done', 'ship'],
      ['step_started', 'notify'],
    ]);
    expect(Buffer.from(t.outputs.get('ship') as Uint8Array)).toEqual(Buffer.from([0x90]));
  });

  it('runs over a list in a needed step\'s output', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'pick', agent: 'picker' }, { name: 'ship', agent: 'shipping', dependsOn: ['pick'], forEach: { output: 'pick.parcels' }, maxParallel: 3 }] });
    await created(store, 'o3', p, {});
    const t = await applied(store, result('o3', 'pick', 'picker', 1, T0 + 5, undefined, { parcels: ['p1', 'p2'] }));
    expect(elements(t)).toEqual([
      ['ship', 0, 2, 'run', 1, 'p1'],
      ['ship', 1, 2, 'run', 1, 'p2'],
    ]);
  });

  it.each([
    [{ items: [1, 2, 3, 4, 5, 6] }, 'forEach: items has 6 elements, above maxItems 5'],
    [{ items: 'abc' }, 'forEach: items is "abc", not a list'],
    [{ items: { a: 1 } }, 'forEach: items is {1 key}, not a list'],
    [{}, 'forEach: items is absent (expected a list)'],
  ])('a list that cannot be used fails the step with the reason, and the task follows onFailure: %j', async (input, why) => {
    const store = new TaskStore(r(), ns());
    await created(store, 'o4', shipPlan(), input);
    const t = await applied(store, result('o4', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
    expect(t.status).toBe('failed');
    expect(t.dispatch).toEqual([]);
    expect(t.events.map((e) => [e.type, e.step, e.reason])).toEqual([
      ['step_done', 'reserve', undefined],
      ['step_failed', 'ship', why],
      ['failed', undefined, `step ship failed: ${why}`],
    ]);
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'o4:ship:step_failed:start-1', lastError: why })]);
    // A retry with a corrected input starts the elements (the step never started: its list is read anew).
    const retried = await store.retryStep({ lease: HELD, taskId: 'o4', step: 'ship', input: encode({ items: ['x'] }), now: T0 + 100, schedulerId: 'sched-1' });
    expect(elements(retried)).toEqual([['ship', 0, 1, 'run', 1, 'x']]);
  });

  it('outputs that total more than the message limit fail the step with the reason (R12)', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'o8', plan({ name: 'w', steps: [{ name: 'ship', agent: 'shipping', forEach: 'items', maxParallel: 3 }] }), { items: [1, 2, 3] });
    const big = 'x'.repeat(400_000);
    await applied(store, result('o8', 'ship', 'shipping', 1, T0 + 10, 0, big));
    await applied(store, result('o8', 'ship', 'shipping', 1, T0 + 20, 1, big));
    const t = await applied(store, result('o8', 'ship', 'shipping', 1, T0 + 30, 2, big));
    const why = "the outputs of ship's 3 elements total 1200016 bytes, over the 1000000-byte message limit: return less from each element";
    expect(t.status).toBe('failed');
    expect(t.events.map((e) => [e.type, e.step, e.item, e.reason])).toEqual([
      ['step_done', 'ship', 2, undefined],
      ['step_failed', 'ship', undefined, why],
      ['failed', undefined, undefined, `step ship failed: ${why}`],
    ]);
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'o8:ship:step_failed:output-1', lastError: why })]);
  });

  it('a result without item for a fan-out step is stale with the reason; an element the step does not have is unknown', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'o5', shipPlan(), { items: ['a', 'b'] });
    await applied(store, result('o5', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
    const old = await store.applyResult(result('o5', 'ship', 'shipping', 1, T0 + 20, undefined, 'whole'));
    expect(old).toEqual({
      applied: false,
      reason: 'step ship runs once per element of a list (forEach), but the result names no element (item): the agent that sent it does not know fan-out; upgrade it (docs/protocol.md §8)',
    });
    const unknown = await store.applyResult(result('o5', 'ship', 'shipping', 1, T0 + 20, 2, 'x')).catch((e: unknown) => e);
    expect(isTriadError(unknown, 'UNKNOWN_STEP')).toBe(true);
    // An element result for a step that is not a fan-out is unknown too.
    const notFanOut = await store.applyResult(result('o5', 'reserve', 'inventory', 1, T0 + 20, 0, 'x')).catch((e: unknown) => e);
    expect(isTriadError(notFanOut, 'UNKNOWN_STEP')).toBe(true);
    expect(await r().hget(store.keys.task('o5'), 'staleResults')).toBe('1');
  });

  it('each element climbs its own ladder; a stale attempt is fenced; an element that gives up fails the step and the task, its alert naming the element', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'o6', shipPlan({ ladder: { retries: 1, maxFailures: 2, longBackoffMs: 1_000 } }), { items: ['a', 'b', 'c'] });
    const t = await applied(store, result('o6', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
    const completeBy = t.dispatch[0]?.completeBy as number;
    // Element 0 times out: the supervisor retries the element alone (attempt 2, the same value).
    const x1 = await store.expireStep('o6', 'ship#0', completeBy + 1, EPOCH);
    expect(x1.action).toBe('retry');
    expect(x1.dispatch).toEqual([expect.objectContaining({ step: 'ship', item: 0, count: 3, kind: 'run', attempt: 2 })]);
    expect(x1.events.map((e) => [e.type, e.step, e.item, e.attempt])).toEqual([['step_retried', 'ship', 0, 2]]);
    // The scheduler asked to send it finds that element attempt, with its value.
    const cmd = await store.stepInFlight('o6', 'ship', 'run', 2, 0);
    expect(cmd && elements(cmd)).toEqual([['ship', 0, 3, 'run', 2, 'a']]);
    expect(await store.stepInFlight('o6', 'ship', 'run', 1, 0)).toBeUndefined();
    // The first attempt's late result is stale; element 1's attempt 1 is still current.
    const late = await store.applyResult(result('o6', 'ship', 'shipping', 1, T0 + 200, 0, 'late'));
    expect(late).toEqual({ applied: false, reason: 'step ship element 0 is processing at attempt 2, result is for attempt 1' });
    await applied(store, result('o6', 'ship', 'shipping', 1, T0 + 210, 1, 'b-out'));
    // Element 0 fails again: its second failure is its last (maxFailures 2).
    const x2 = await store.expireStep('o6', 'ship#0', completeBy + 20_000, EPOCH);
    expect(x2.action).toBe('error');
    expect(x2.events.map((e) => [e.type, e.step, e.item])).toEqual([
      ['step_error', 'ship', 0],
      ['step_abandoned', 'ship', 2],
      ['failed', undefined, undefined],
    ]);
    expect((await store.getTask('o6'))?.error).toBe('step ship element 0 failed 2 times: complete-by passed without a result (timed out, or the agent died)');
    expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'o6:ship#0:step_error:2', step: 'ship', item: 0, failureCount: 2 })]);
    expect(await stepOf(store, 'o6', 'ship')).toMatchObject({ status: 'error' });
    expect(await deadlines(store)).toEqual(new Map());
    // A late result of the abandoned element is stale.
    expect((await store.applyResult(result('o6', 'ship', 'shipping', 1, T0 + 30_000, 2, 'c'))).applied).toBe(false);

    // The operator's retry restarts the stopped elements with fresh budgets; the processed one stays.
    const retried = await store.retryStep({ lease: HELD, taskId: 'o6', step: 'ship', now: T0 + 40_000, schedulerId: 'sched-1' });
    expect(elements(retried)).toEqual([
      ['ship', 0, 3, 'run', 3, 'a'],
      ['ship', 2, 3, 'run', 2, 'c'],
    ]);
    await applied(store, result('o6', 'ship', 'shipping', 3, T0 + 40_010, 0, 'a-out'));
    const done = await applied(store, result('o6', 'ship', 'shipping', 2, T0 + 40_020, 2, 'c-out'));
    expect(decode(done.outputs.get('ship') as Uint8Array)).toEqual(['a-out', 'b-out', 'c-out']);
  });

  it('an element refused by an open breaker parks alone; a reported failure is retried by the supervisor', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'o7', shipPlan(), { items: ['a', 'b'] });
    await applied(store, result('o7', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
    const parked = await applied(store, { ...failed('o7', 'ship', 'shipping', 1, T0 + 20, 1, 'breaker open', true), outcome: { ok: false, message: 'breaker open', retryable: true, effect: 'none', circuitOpenRetryAfterMs: 500 } });
    expect(parked.events.map((e) => [e.type, e.step, e.item])).toEqual([['step_parked', 'ship', 1]]);
    expect((await deadlines(store)).get('o7|ship#1')).toBe(T0 + 520);
    const retried = await store.expireStep('o7', 'ship#1', T0 + 520, EPOCH);
    expect(retried.action).toBe('retry');
    expect(retried.dispatch).toEqual([expect.objectContaining({ item: 1, attempt: 2 })]);
    await applied(store, failed('o7', 'ship', 'shipping', 1, T0 + 600, 0, 'try again', true));
    expect((await deadlines(store)).get('o7|ship#0')).toBe(T0 + 600);
  });

  describe('undo', () => {
    it('an element that gives up undoes the task: elements in flight drain, then each processed element is compensated, latest first, maxParallel at once', async () => {
      const store = new TaskStore(r(), ns());
      await created(store, 'u1', shipPlan({ maxParallel: 2 }), { items: ['a', 'b', 'c', 'd'] }, 'compensate');
      await applied(store, result('u1', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
      await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 20, 0, 'a-out'));
      await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 30, 1, 'b-out'));
      // Elements 2 and 3 are in flight; 3 fails for good.
      const gaveUp = await applied(store, failed('u1', 'ship', 'shipping', 1, T0 + 40, 3, 'no such address'));
      expect(gaveUp.status).toBe('compensating');
      expect(gaveUp.dispatch).toEqual([]); // element 2 is in flight: the undo waits for it
      expect((await store.getTask('u1'))?.error).toBe('step ship element 3 failed permanently: no such address');
      // Element 2 ends (a drain): processed; then the undo compensates by 0009's order — 2 (processed last),
      // 3 (in doubt, started at T0+30) two at once, then 1, then 0 — and then reserve.
      const drained = await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 50, 2, 'c-out'));
      expect(drained.events.map((e) => [e.type, e.step, e.item, e.reason])).toEqual([
        ['step_done', 'ship', 2, undefined],
        ['compensation_started', 'ship', undefined, '4 of 4 elements to compensate'],
        ['compensation_started', 'ship', 2, undefined],
        ['compensation_started', 'ship', 3, undefined],
      ]);
      // Element 3 failed with an unknown effect: compensated with no output; element 2 gets its own output.
      expect(drained.dispatch).toEqual([
        expect.objectContaining({ step: 'ship', item: 2, kind: 'compensate', effect: 'applied', needs: ['ship#2'] }),
        expect.objectContaining({ step: 'ship', item: 3, kind: 'compensate', effect: 'unknown', needs: [] }),
      ]);
      expect(decode(drained.outputs.get('ship#2') as Uint8Array)).toBe('c-out');
      expect(decode(drained.outputs.get('=ship#2') as Uint8Array)).toBe('c');
      const c3 = await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 60, 3, null, 'compensate'));
      expect(c3.dispatch).toEqual([expect.objectContaining({ item: 1, kind: 'compensate' })]);
      const c2 = await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 70, 2, null, 'compensate'));
      expect(c2.dispatch).toEqual([expect.objectContaining({ item: 0, kind: 'compensate' })]);
      await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 80, 1, null, 'compensate'));
      const c0 = await applied(store, result('u1', 'ship', 'shipping', 1, T0 + 90, 0, null, 'compensate'));
      expect(c0.events.map((e) => [e.type, e.step, e.item])).toEqual([
        ['compensation_done', 'ship', 0],
        ['compensation_done', 'ship', undefined],
        ['compensation_started', 'reserve', undefined],
      ]);
      const end = await applied(store, result('u1', 'reserve', 'inventory', 1, T0 + 100, undefined, null, 'compensate'));
      expect(end.status).toBe('compensated');
      expect(await stepOf(store, 'u1', 'ship')).toMatchObject({ status: 'compensated' });
    });

    it('a cancel abandons parked elements, waits for those in flight, and compensates only the elements that may have taken effect', async () => {
      const store = new TaskStore(r(), ns());
      await created(store, 'u2', shipPlan({ maxParallel: 2 }), { items: ['a', 'b', 'c', 'd'] }, 'compensate');
      await applied(store, result('u2', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
      await applied(store, { ...failed('u2', 'ship', 'shipping', 1, T0 + 20, 1, 'open', true), outcome: { ok: false, message: 'open', retryable: true, effect: 'none', circuitOpenRetryAfterMs: 5_000 } });
      const cancel = await store.cancelTask({ lease: HELD, taskId: 'u2', reason: 'stop', now: T0 + 30, schedulerId: 'sched-1' });
      expect(cancel.events.map((e) => [e.type, e.step, e.item])).toEqual([
        ['step_abandoned', 'ship', 1],
        ['compensating', undefined, undefined],
      ]);
      expect(cancel.dispatch).toEqual([]);
      // Element 0 in flight times out during the undo: abandoned with an unknown effect; the step settles.
      const x = await store.expireStep('u2', 'ship#0', T0 + 20_000, EPOCH);
      expect(x.action).toBe('abandon');
      expect(x.events.map((e) => [e.type, e.step, e.item])).toEqual([
        ['step_abandoned', 'ship', 0],
        ['step_abandoned', 'ship', undefined],
        ['compensation_started', 'ship', undefined],
        ['compensation_started', 'ship', 0],
      ]);
      // Only element 0 (unknown effect) is compensated; 1 never reached the service, 2 and 3 never started.
      expect(x.dispatch).toEqual([expect.objectContaining({ step: 'ship', item: 0, kind: 'compensate', effect: 'unknown' })]);
      const c = await applied(store, result('u2', 'ship', 'shipping', 1, T0 + 20_010, 0, null, 'compensate'));
      expect(c.events.map((e) => [e.type, e.step, e.item])).toEqual([
        ['compensation_done', 'ship', 0],
        ['compensation_done', 'ship', undefined],
        ['compensation_started', 'reserve', undefined],
      ]);
    });

    it('an element compensation that gives up ends the step and the task compensation_failed with an alert for the element; a retry compensates it again', async () => {
      const store = new TaskStore(r(), ns());
      const p = plan({
        name: 'w',
        steps: [{ name: 'ship', agent: 'shipping', forEach: 'items', maxParallel: 2, compensate: { agent: 'shipping' } }],
      });
      await created(store, 'u3', p, { items: ['a', 'b', 'c'] }, 'compensate');
      await applied(store, result('u3', 'ship', 'shipping', 1, T0 + 10, 0, 'a'));
      await applied(store, result('u3', 'ship', 'shipping', 1, T0 + 20, 1, 'b'));
      const cancel = await store.cancelTask({ lease: HELD, taskId: 'u3', reason: 'stop', now: T0 + 30, schedulerId: 'sched-1' });
      expect(cancel.dispatch).toEqual([]); // element 2 in flight
      const drained = await applied(store, result('u3', 'ship', 'shipping', 1, T0 + 40, 2, 'c'));
      expect(drained.dispatch.map((d) => [d.item, d.kind])).toEqual([
        [2, 'compensate'],
        [1, 'compensate'],
      ]);
      const gaveUp = await store.applyResult({ ...failed('u3', 'ship', 'shipping', 1, T0 + 50, 2, 'cannot undo'), kind: 'compensate' });
      if (!gaveUp.applied) throw new Error('expected applied');
      // Element 1's compensation is still running: no other starts, the task waits for it.
      expect(gaveUp.transition.status).toBe('compensating');
      expect(gaveUp.transition.dispatch).toEqual([]);
      const last = await applied(store, result('u3', 'ship', 'shipping', 1, T0 + 60, 1, null, 'compensate'));
      expect(last.status).toBe('compensation_failed');
      expect((await store.getTask('u3'))?.error).toBe('compensation of ship failed for 1 of its elements');
      expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'u3:ship#2:compensation_failed:1', kind: 'compensation_failed', step: 'ship', item: 2 })]);
      // The operator retries: element 2's compensation again, then element 0's (not started yet).
      const retried = await store.retryStep({ lease: HELD, taskId: 'u3', step: 'ship', now: T0 + 70, schedulerId: 'sched-1' });
      expect(retried.dispatch.map((d) => [d.item, d.kind, d.attempt])).toEqual([
        [2, 'compensate', 2],
        [0, 'compensate', 1],
      ]);
      await applied(store, result('u3', 'ship', 'shipping', 2, T0 + 80, 2, null, 'compensate'));
      const end = await applied(store, result('u3', 'ship', 'shipping', 1, T0 + 90, 0, null, 'compensate'));
      expect(end.status).toBe('cancelled');
    });

    it('a task that fails (onFailure error) abandons the elements in flight; the redispatch after a crash lists element requests', async () => {
      const store = new TaskStore(r(), ns());
      await created(store, 'u4', shipPlan({ maxParallel: 3 }), { items: ['a', 'b', 'c'] });
      await applied(store, result('u4', 'reserve', 'inventory', 1, T0 + 10, undefined, {}));
      const inFlight = await store.inFlight('u4');
      expect(inFlight && elements(inFlight)).toEqual([
        ['ship', 0, 3, 'run', 1, 'a'],
        ['ship', 1, 3, 'run', 1, 'b'],
        ['ship', 2, 3, 'run', 1, 'c'],
      ]);
      const t = await applied(store, failed('u4', 'ship', 'shipping', 1, T0 + 20, 1, 'bad parcel'));
      expect(t.status).toBe('failed');
      expect(t.events.map((e) => [e.type, e.step, e.item])).toEqual([
        ['step_failed', 'ship', 1],
        ['step_abandoned', 'ship', 0],
        ['step_abandoned', 'ship', 2],
        ['failed', undefined, undefined],
      ]);
      expect(await deadlines(store)).toEqual(new Map());
    });
  });
});
