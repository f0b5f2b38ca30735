// Durable sleeps (decision 0019 §2.4 R2–R5, U1; increment 4) on a real redis-server: a sleep is a deadline
// in the index, not an agent call; the supervisor's expireStep wakes it at its time (never before: an early
// sweep only re-indexes it) and starts what it made ready; a wake time read from the input that has passed
// completes the sleep at once, a bad one fails the step; an undo or a cancel stops a sleep at once, and it
// is never compensated; a retry with a corrected input sleeps again.
import { describe, expect, it } from 'vitest';
import { encode, isTriadError, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMap } from './buckets.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-sleep-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
const ns = (): string => `s${process.pid}-${++nsCounter}`;
const T0 = 1_700_000_000_000;
const EPOCH = 1;

function plan(def: WorkflowDefinitionInput): PlanStep[] {
  return compilePlan(validateDefinition(def));
}

async function created(store: TaskStore, taskId: string, p: PlanStep[], input: unknown, onFailure: 'error' | 'compensate' = 'error', now = T0) {
  const out = await store.createTask({ lease: HELD, taskId, workflow: 'w', version: 1, input: encode(input), plan: p, onFailure, client: 'client-1', now, schedulerId: 'sched-1' });
  if (!out.created) throw new Error('expected a new task');
  return out.transition;
}

function ok(taskId: string, step: string, agent: string, attempt: number, now: number, kind: 'run' | 'compensate' = 'run') {
  return { lease: HELD, taskId, step, kind, attempt, now, schedulerId: 'sched-1', agentId: 'agent-1', agentType: agent, outcome: { ok: true as const, output: encode({ step }) } };
}

const deadlines = (store: TaskStore) => indexMap(r(), store, 'deadlines');

async function step(store: TaskStore, taskId: string, name: string) {
  const s = (await store.getTask(taskId))?.steps.find((x) => x.name === name);
  if (!s) throw new Error(`no step ${name}`);
  return s;
}

/** reserve → cool-off (2 s) → ship */
const napPlan = plan({
  name: 'w',
  steps: [
    { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
    { name: 'cool-off', sleep: { ms: 2_000 }, dependsOn: ['reserve'] },
    { name: 'ship', agent: 'shipping', dependsOn: ['cool-off'] },
  ],
});

describe('durable sleep', () => {
  it('sleeps as a deadline in the index, wakes only at its time, and starts the steps after it', async () => {
    const store = new TaskStore(r(), ns());
    await created(store, 'n1', napPlan, {});
    const after = await store.applyResult(ok('n1', 'reserve', 'inventory', 1, T0 + 10));
    if (!after.applied) throw new Error('expected applied');
    const wakeAt = T0 + 10 + 2_000;
    expect(after.transition.dispatch).toEqual([]);
    expect(after.transition.events.map((e) => [e.type, e.step, e.until])).toEqual([
      ['step_done', 'reserve', undefined],
      ['step_sleeping', 'cool-off', wakeAt],
    ]);
    expect(await deadlines(store)).toEqual(new Map([['n1|cool-off', wakeAt]]));
    expect(await step(store, 'n1', 'cool-off')).toMatchObject({ kind: 'sleep', status: 'sleeping', until: wakeAt, startedAt: T0 + 10, attempt: 0, effect: 'none' });

    // A sweep before the time (a leader whose clock runs ahead, or a member read late) changes nothing.
    const early = await store.expireStep('n1', 'cool-off', wakeAt - 1, EPOCH);
    expect(early.action).toBe('noop');
    expect((await step(store, 'n1', 'cool-off')).status).toBe('sleeping');
    expect(await deadlines(store)).toEqual(new Map([['n1|cool-off', wakeAt]]));

    const woke = await store.expireStep('n1', 'cool-off', wakeAt + 3, EPOCH);
    expect(woke.action).toBe('wake');
    expect(woke.client).toBe('client-1');
    expect(woke.dispatch).toEqual([{ step: 'ship', agent: 'shipping', kind: 'run', attempt: 1, completeBy: wakeAt + 3 + 10_000, needs: [] }]);
    expect(woke.events.map((e) => [e.type, e.step])).toEqual([
      ['step_done', 'cool-off'],
      ['step_started', 'ship'],
    ]);
    expect(await step(store, 'n1', 'cool-off')).toMatchObject({ status: 'processed', finishedAt: wakeAt + 3, order: 2 });
    expect(await deadlines(store)).toEqual(new Map([['n1|ship', wakeAt + 3 + 10_000]]));
    // The scheduler the supervisor asks to send it finds the request in flight.
    expect((await store.inFlight('n1'))?.dispatch.map((d) => d.step)).toEqual(['ship']);
    // A repeated sweep of the same member (a leader that crashed after the wake) does nothing.
    expect((await store.expireStep('n1', 'cool-off', wakeAt + 50, EPOCH)).action).toBe('noop');
  });

  it('refuses any result for a sleep as forged: no agent runs it', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'wait', sleep: { ms: 500 } }] });
    await created(store, 'f1', p, {});
    const res = await store.applyResult(ok('f1', 'wait', 'inventory', 0, T0 + 10));
    expect(res).toEqual({ applied: false, forged: true, reason: "step wait calls no agent, but a result for it came on agent inventory's subject" });
    expect((await step(store, 'f1', 'wait')).status).toBe('sleeping');
  });

  it('a wake that ends the last step completes the task', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'wait', sleep: { ms: 500 } }] });
    const t = await created(store, 'n2', p, {});
    expect(t.events.map((e) => e.type)).toEqual(['received', 'step_sleeping']);
    const woke = await store.expireStep('n2', 'wait', T0 + 500, EPOCH);
    expect(woke.action).toBe('wake');
    expect(woke.events.map((e) => e.type)).toEqual(['step_done', 'completed']);
    expect((await store.getTask('n2'))?.status).toBe('completed');
    expect([...(await indexMap(r(), store, 'finished')).keys()]).toEqual(['n2']);
    expect(await deadlines(store)).toEqual(new Map());
  });

  it('a deposed leader cannot wake a sleep', async () => {
    const store = new TaskStore(r(), ns());
    const p = plan({ name: 'w', steps: [{ name: 'wait', sleep: { ms: 500 } }] });
    await created(store, 'n3', p, {});
    await store.expireStep('n3', 'other', T0, 5); // a newer leader (epoch 5) has acted in this bucket
    const refused = await store.expireStep('n3', 'wait', T0 + 600, 4).catch((e: unknown) => e);
    expect(isTriadError(refused, 'STALE')).toBe(true);
    expect((await step(store, 'n3', 'wait')).status).toBe('sleeping');
  });

  describe('untilInput', () => {
    const remind = plan({
      name: 'w',
      steps: [
        { name: 'remind', sleep: { untilInput: 'remindAt', maxMs: 86_400_000 } },
        { name: 'send', agent: 'mailer', dependsOn: ['remind'] },
      ],
    });

    it('sleeps until the epoch ms the input holds', async () => {
      const store = new TaskStore(r(), ns());
      const t = await created(store, 'u1', remind, { remindAt: T0 + 60_000 });
      expect(t.events.map((e) => [e.type, e.until])).toEqual([
        ['received', undefined],
        ['step_sleeping', T0 + 60_000],
      ]);
      expect(await deadlines(store)).toEqual(new Map([['u1|remind', T0 + 60_000]]));
    });

    it('a time that has passed ends the sleep at once, and the next step starts in the same transition', async () => {
      const store = new TaskStore(r(), ns());
      const t = await created(store, 'u2', remind, { remindAt: T0 - 5 });
      expect(t.events.map((e) => [e.type, e.step])).toEqual([
        ['received', undefined],
        ['step_done', 'remind'],
        ['step_started', 'send'],
      ]);
      expect(t.dispatch.map((d) => d.step)).toEqual(['send']);
    });

    it.each([
      [{}, 'sleep.untilInput: input field remindAt is absent (expected epoch ms)'],
      [{ remindAt: 'tomorrow' }, 'sleep.untilInput: input field remindAt is "tomorrow", not a number (expected epoch ms)'],
      [{ remindAt: -1 }, 'sleep.untilInput: input field remindAt is -1, not a time (expected epoch ms)'],
      [{ remindAt: T0 + 90_000_000 }, `sleep.untilInput: input field remindAt is ${T0 + 90_000_000}, more than maxMs 86400000 ms ahead (the step may sleep at most that long)`],
    ])('a wake time that cannot be used fails the step with the reason: %j', async (input, why) => {
      const store = new TaskStore(r(), ns());
      const t = await created(store, 'u3', remind, input);
      expect(t.status).toBe('failed');
      expect(t.events.map((e) => [e.type, e.step, e.reason])).toEqual([
        ['received', undefined, undefined],
        ['step_failed', 'remind', why],
        ['failed', undefined, `step remind failed: ${why}`],
      ]);
      expect(await store.openAlerts()).toEqual([expect.objectContaining({ id: 'u3:remind:step_failed:start-1', lastError: why })]);
    });

    it('a retry with a corrected input sleeps again', async () => {
      const store = new TaskStore(r(), ns());
      await created(store, 'u4', remind, {});
      const retried = await store.retryStep({ lease: HELD, taskId: 'u4', step: 'remind', input: encode({ remindAt: T0 + 5_000 }), now: T0 + 100, schedulerId: 'sched-1' });
      expect(retried.status).toBe('running');
      expect(retried.events.map((e) => [e.type, e.until])).toEqual([['step_sleeping', T0 + 5_000]]);
      expect(await store.openAlerts()).toEqual([]);
      expect(await deadlines(store)).toEqual(new Map([['u4|remind', T0 + 5_000]]));
    });
  });

  describe('stopped by an undo', () => {
    it('a cancel stops the sleep at once (its deadline leaves the index) and undoes only what ran', async () => {
      const store = new TaskStore(r(), ns());
      await created(store, 'c1', napPlan, {}, 'compensate');
      await store.applyResult(ok('c1', 'reserve', 'inventory', 1, T0 + 10));
      const cancel = await store.cancelTask({ lease: HELD, taskId: 'c1', reason: 'customer changed their mind', now: T0 + 500, schedulerId: 'sched-1' });
      expect(cancel.events.map((e) => [e.type, e.step, e.reason])).toEqual([
        ['step_abandoned', 'cool-off', 'stopped sleeping: the task is being undone'],
        ['compensating', undefined, 'customer changed their mind'],
        ['compensation_started', 'reserve', undefined],
      ]);
      expect(cancel.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate' })]);
      expect(await deadlines(store)).toEqual(new Map([['c1|reserve', expect.any(Number) as number]]));
      expect(await step(store, 'c1', 'cool-off')).toMatchObject({ status: 'abandoned', effect: 'none' });
      // The sleep's time passes: nothing wakes.
      expect((await store.expireStep('c1', 'cool-off', T0 + 5_000, EPOCH)).action).toBe('noop');
      const undone = await store.applyResult(ok('c1', 'reserve', 'inventory', 1, T0 + 600, 'compensate'));
      if (!undone.applied) throw new Error('expected applied');
      expect(undone.transition.status).toBe('cancelled');
      expect((await step(store, 'c1', 'cool-off')).compensation).toBeUndefined();
    });

    it('a task that fails (onFailure error) by its deadline stops its sleep', async () => {
      const store = new TaskStore(r(), ns());
      const p = plan({ name: 'w', deadlineMs: 1_000, steps: [{ name: 'long', sleep: { ms: 60_000 } }] });
      const out = await store.createTask({ lease: HELD, taskId: 'd1', workflow: 'w', version: 1, input: encode({}), plan: p, onFailure: 'error', deadlineMs: 1_000, client: 'client-1', now: T0, schedulerId: 'sched-1' });
      if (!out.created) throw new Error('expected a new task');
      const x = await store.expireTask('d1', T0 + 1_000, EPOCH);
      expect(x.events.map((e) => [e.type, e.step])).toEqual([
        ['step_abandoned', 'long'],
        ['failed', undefined],
      ]);
      expect(x.events[0]?.reason).toMatch(/^stopped sleeping: /);
      expect(await deadlines(store)).toEqual(new Map());
    });
  });
});
