// Decision 0020, increment 1, on a real redis-server: a task's priority is stored only when it is not the
// default 3, and a throttled result (the service asked for time) parks the step until its Retry-After as
// a refusal — counted with the breaker's refusals against maxCircuitOpen, never as a failure until past it.
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-throttle-test', (redis) => redis.set(HELD.key, HELD.token));
const T0 = 1_700_000_000_000;
let n = 0;
const ns = (): string => `th${process.pid}-${++n}`;

const plan = compilePlan(
  validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 100, ladder: { retries: 1, longBackoffMs: 1_000, maxFailures: 2, maxCircuitOpen: 2 } }] }),
);

function create(store: TaskStore, taskId: string, priority?: number) {
  return store.createTask({ lease: HELD, taskId, workflow: 'w', version: 1, input: encode({}), plan, onFailure: 'error', client: 'c1', now: T0, schedulerId: 's1', ...(priority !== undefined ? { priority } : {}) });
}

function refused(taskId: string, attempt: number, now: number, how: { throttledRetryAfterMs: number } | { circuitOpenRetryAfterMs: number }) {
  return {
    lease: HELD,
    taskId,
    step: 'a',
    kind: 'run' as const,
    attempt,
    now,
    schedulerId: 's1',
    agentId: 'agent-1',
    agentType: 'x',
    outcome: { ok: false as const, message: 'payment is rate limited to 10 calls/s (rateLimit); nothing was applied, retry after 1 s', retryable: true, effect: 'none' as const, ...how },
  };
}

async function stepA(store: TaskStore, taskId: string) {
  const s = (await store.getTask(taskId))?.steps.find((x) => x.name === 'a');
  if (!s) throw new Error(`no step a in ${taskId}`);
  return s;
}

describe('priority', () => {
  it('is stored only when it is not the default 3, and shown by the task view', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'p-none');
    await create(store, 'p-3', 3);
    await create(store, 'p-1', 1);
    await create(store, 'p-5', 5);
    expect(await r().hexists(store.keys.task('p-none'), 'priority')).toBe(0);
    expect(await r().hexists(store.keys.task('p-3'), 'priority')).toBe(0);
    expect((await store.getTask('p-none'))?.priority).toBeUndefined();
    expect((await store.getTask('p-3'))?.priority).toBeUndefined();
    expect((await store.getTask('p-1'))?.priority).toBe(1);
    expect((await store.getTask('p-5'))?.priority).toBe(5);
  });
});

describe('a throttled result', () => {
  it('parks the step until its Retry-After without counting a failure, sharing the breaker refusals\' limit', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 't-1');
    let res = await store.applyResult(refused('t-1', 1, T0 + 10, { throttledRetryAfterMs: 1_000 }));
    if (!res.applied) throw new Error(res.reason);
    expect(res.transition.events[0]).toMatchObject({ type: 'step_parked', reason: expect.stringMatching(/^throttled by the service: payment is rate limited/) });
    expect(await stepA(store, 't-1')).toMatchObject({ status: 'parked', failureCount: 0, circuitCount: 1, completeBy: T0 + 1_010 });
    expect((await store.expireStep('t-1', 'a', T0 + 1_010, 1)).action).toBe('retry');
    // A breaker refusal next: the same count (2 = maxCircuitOpen), still no failure.
    await store.applyResult(refused('t-1', 2, T0 + 1_020, { circuitOpenRetryAfterMs: 500 }));
    expect(await stepA(store, 't-1')).toMatchObject({ status: 'parked', failureCount: 0, circuitCount: 2 });
    expect((await store.expireStep('t-1', 'a', T0 + 1_520, 1)).action).toBe('retry');
    // A third refusal (a throttle) is past maxCircuitOpen: reported as a retryable failure the ladder counts.
    res = await store.applyResult(refused('t-1', 3, T0 + 1_530, { throttledRetryAfterMs: 1_000 }));
    if (!res.applied) throw new Error(res.reason);
    expect(res.transition.events[0]).toMatchObject({ type: 'step_failed', reason: expect.stringMatching(/3 attempts refused by an open breaker or a throttling service, over maxCircuitOpen 2/) });
    expect(await stepA(store, 't-1')).toMatchObject({ status: 'processing', circuitCount: 3, completeBy: T0 + 1_530 });
    expect(await store.expireStep('t-1', 'a', T0 + 1_530, 1)).toMatchObject({ action: 'retry', failureCount: 1 });
  });

  it('never parks past the phase\'s give-up time', async () => {
    const store = new TaskStore(r(), ns());
    const p = compilePlan(validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 100, giveUpAfterMs: 5_000 }] }));
    await store.createTask({ lease: HELD, taskId: 't-2', workflow: 'w', version: 1, input: encode({}), plan: p, onFailure: 'error', client: 'c1', now: T0, schedulerId: 's1' });
    await store.applyResult(refused('t-2', 1, T0 + 10, { throttledRetryAfterMs: 3_600_000 }));
    const s = await stepA(store, 't-2');
    expect(s).toMatchObject({ status: 'parked', failureCount: 0 });
    expect(s.completeBy).toBe(s.giveUpAt);
  });
});
