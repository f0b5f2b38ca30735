// Decisions 0009 and 0010 on a real redis-server: an undo waits for the steps in flight, then compensates
// every step that may have taken effect — completed, or in doubt (timed out, agent died, failed after a
// try that may have reached its service) — in reverse order, and skips only the steps that certainly
// never reached their service.
import { describe, expect, it } from 'vitest';
import { encode, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore, type Transition } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-undo-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
function ns(): string {
  nsCounter++;
  return `u${process.pid}-${nsCounter}`;
}

const T0 = 1_700_000_000_000;

/** reserve → charge → ship, each with a compensation; fraud in parallel with reserve, none. */
const orders = compilePlan(
  validateDefinition({
    name: 'orders',
    onFailure: 'compensate',
    defaults: { ladder: { retries: 0, longBackoffMs: 100, maxFailures: 1, maxCircuitOpen: 1 } },
    steps: [
      { name: 'reserve', agent: 'inventory', budgetMs: 1_000, compensate: { agent: 'inventory', budgetMs: 500 } },
      { name: 'fraud', agent: 'fraud', budgetMs: 1_000 },
      { name: 'charge', agent: 'payment', budgetMs: 1_000, dependsOn: ['reserve', 'fraud'], compensate: { agent: 'payment', budgetMs: 500 } },
      { name: 'ship', agent: 'shipping', budgetMs: 1_000, dependsOn: ['charge'], compensate: { agent: 'shipping', budgetMs: 500 } },
    ],
  } satisfies WorkflowDefinitionInput),
);

function setup(p: PlanStep[] = orders) {
  const namespace = ns();
  const store = new TaskStore(r(), namespace);
  const create = (taskId: string) =>
    store.createTask({ lease: HELD, taskId, workflow: 'orders', version: 1, input: encode({}), plan: p, onFailure: 'compensate', client: 'c', now: T0, schedulerId: 's' });
  // The agent type the plan names for the phase: the subject a real result would come on.
  const agentType = (step: string, kind: 'run' | 'compensate'): string => {
    const spec = p.find((x) => x.n === step);
    return (kind === 'compensate' ? spec?.c?.a : spec?.a) ?? 'nobody';
  };
  const result = (taskId: string, step: string, attempt: number, now: number, outcome: 'ok' | 'permanent' | 'retryable', kind: 'run' | 'compensate' = 'run', effect: 'none' | 'unknown' = 'unknown') =>
    store.applyResult({
      lease: HELD,
      taskId,
      step,
      kind,
      attempt,
      now,
      schedulerId: 's',
      agentId: 'agent-1',
      agentType: agentType(step, kind),
      outcome: outcome === 'ok' ? { ok: true, output: encode({ step }) } : { ok: false, message: `${step} ${outcome}`, retryable: outcome === 'retryable', effect },
    });
  const cancel = (taskId: string, now: number) => store.cancelTask({ lease: HELD, taskId, reason: 'operator cancel', now, schedulerId: 's' });
  const statuses = async (taskId: string) => Object.fromEntries((await store.getTask(taskId))?.steps.map((s) => [s.name, s.status]) ?? []);
  return { store, create, result, cancel, statuses, agentType };
}

function applied(res: { applied: true; transition: Transition } | { applied: false; reason: string }): Transition {
  if (!res.applied) throw new Error(`not applied: ${res.reason}`);
  return res.transition;
}

describe('an undo waits for the steps in flight', () => {
  it('cancel while charge runs: nothing is compensated until charge ends; its late ok is compensated first (with its output), then reserve', async () => {
    const u = setup();
    await u.create('c-1');
    applied(await u.result('c-1', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('c-1', 'fraud', 1, T0 + 20, 'ok'));
    const cancelled = await u.cancel('c-1', T0 + 30);
    // charge is in flight: the undo waits.
    expect(cancelled.status).toBe('compensating');
    expect(cancelled.dispatch).toEqual([]);
    expect(await u.statuses('c-1')).toMatchObject({ reserve: 'processed', charge: 'processing', ship: 'pending' });
    // Its result arrives: the charge happened. It is compensated first (it completed last), with its output.
    const drained = applied(await u.result('c-1', 'charge', 1, T0 + 40, 'ok'));
    expect(drained.events.map((e) => [e.type, e.step])).toEqual([
      ['step_done', 'charge'],
      ['compensation_started', 'charge'],
    ]);
    expect(drained.dispatch).toEqual([{ step: 'charge', agent: 'payment', kind: 'compensate', attempt: 1, completeBy: T0 + 540, needs: ['charge'], effect: 'applied' }]);
    expect(drained.outputs.get('charge')).toBeDefined();
    // ship never started: nothing to undo. Then reserve; fraud has no compensation.
    const next = applied(await u.result('c-1', 'charge', 1, T0 + 50, 'ok', 'compensate'));
    expect(next.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate', effect: 'applied' })]);
    const done = applied(await u.result('c-1', 'reserve', 1, T0 + 60, 'ok', 'compensate'));
    expect(done.status).toBe('cancelled');
    expect(await u.statuses('c-1')).toEqual({ reserve: 'compensated', fraud: 'processed', charge: 'compensated', ship: 'pending' });
  });

  it('a step in flight that ends with a failure none of whose tries took effect is abandoned and skipped', async () => {
    const u = setup();
    await u.create('c-2');
    applied(await u.result('c-2', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('c-2', 'fraud', 1, T0 + 20, 'ok'));
    await u.cancel('c-2', T0 + 30);
    const drained = applied(await u.result('c-2', 'charge', 1, T0 + 40, 'retryable', 'run', 'none'));
    expect(drained.events.map((e) => [e.type, e.step])).toEqual([
      ['step_abandoned', 'charge'],
      ['compensation_started', 'reserve'],
    ]);
    expect((await u.store.getTask('c-2'))?.steps.find((s) => s.name === 'charge')).toMatchObject({ status: 'abandoned', effect: 'none' });
  });

  it('a step whose complete-by passes during the undo is in doubt: compensated with effect unknown and no output', async () => {
    const u = setup();
    await u.create('c-3');
    applied(await u.result('c-3', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('c-3', 'fraud', 1, T0 + 20, 'ok'));
    await u.cancel('c-3', T0 + 30);
    // charge's complete-by (T0 + 20 + 1000) passes with no result: abandoned, in doubt.
    expect((await u.store.expireStep('c-3', 'charge', T0 + 1_019, 1)).action).toBe('noop');
    const x = await u.store.expireStep('c-3', 'charge', T0 + 1_020, 1);
    expect(x.action).toBe('abandon');
    expect(x.dispatch).toEqual([{ step: 'charge', agent: 'payment', kind: 'compensate', attempt: 1, completeBy: T0 + 1_520, needs: [], effect: 'unknown' }]);
    expect((await u.store.getTask('c-3'))?.steps.find((s) => s.name === 'charge')).toMatchObject({ status: 'compensating', effect: 'unknown' });
    // The scheduler re-sends it (e.g. after a crash) the same way.
    const again = await u.store.inFlight('c-3');
    expect(again?.dispatch).toEqual([{ step: 'charge', agent: 'payment', kind: 'compensate', attempt: 1, completeBy: T0 + 1_520, needs: [], effect: 'unknown' }]);
    // A late result of the abandoned attempt is stale: the undo covers it.
    const late = await u.result('c-3', 'charge', 1, T0 + 1_100, 'ok');
    expect(late.applied).toBe(false);
  });

  it('a step that reported a failure whose tries took no effect, and then expired during the undo, stays skipped', async () => {
    const u = setup();
    await u.create('c-4');
    applied(await u.result('c-4', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('c-4', 'fraud', 1, T0 + 20, 'ok'));
    // The agent reported a retryable failure, none of whose tries reached the service; the supervisor
    // has not decided its next attempt yet when the cancel comes: nothing is in flight.
    applied(await u.result('c-4', 'charge', 1, T0 + 25, 'retryable', 'run', 'none'));
    const c = await u.cancel('c-4', T0 + 30);
    expect(c.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate' })]);
    expect((await u.store.getTask('c-4'))?.steps.find((s) => s.name === 'charge')).toMatchObject({ status: 'abandoned', effect: 'none' });
    // Its passed deadline is gone from the index with it: the supervisor finds nothing to do.
    expect((await u.store.expireStep('c-4', 'charge', T0 + 1_020, 1)).action).toBe('noop');
  });

  it('an attempt that expires with no result is in doubt even if no agent ever took it: nothing on the bus can tell (decision 0010)', async () => {
    const u = setup();
    await u.create('c-5');
    applied(await u.result('c-5', 'fraud', 1, T0 + 10, 'ok'));
    const x = await u.store.expireStep('c-5', 'reserve', T0 + 1_000, 1);
    // maxFailures 1: the timed-out reserve gives up; the undo compensates it (the tombstone makes that safe).
    expect(x.action).toBe('compensate');
    expect(x.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate', effect: 'unknown' })]);
  });
});

describe('in-doubt steps are compensated, in reverse order', () => {
  it('a step whose last attempt timed out, then failed for good, is compensated before the steps it depends on', async () => {
    const u = setup();
    await u.create('d-1');
    applied(await u.result('d-1', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('d-1', 'fraud', 1, T0 + 20, 'ok'));
    // maxFailures 1: the timed-out charge gives up, and the undo begins in the same transition.
    const x = await u.store.expireStep('d-1', 'charge', T0 + 1_020, 1);
    expect(x.action).toBe('compensate');
    expect(x.dispatch).toEqual([expect.objectContaining({ step: 'charge', kind: 'compensate', effect: 'unknown', needs: [] })]);
    const t = await u.store.getTask('d-1');
    expect(t?.status).toBe('compensating');
    expect(t?.steps.find((s) => s.name === 'charge')).toMatchObject({ status: 'compensating', effect: 'unknown' });
    const next = applied(await u.result('d-1', 'charge', 1, T0 + 1_030, 'ok', 'compensate'));
    expect(next.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate', effect: 'applied' })]);
    expect(applied(await u.result('d-1', 'reserve', 1, T0 + 1_040, 'ok', 'compensate')).status).toBe('compensated');
  });

  it('a permanent failure after a try that may have reached the service is compensated; one refused outright is not', async () => {
    const u = setup();
    await u.create('d-2');
    applied(await u.result('d-2', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('d-2', 'fraud', 1, T0 + 20, 'ok'));
    const t = applied(await u.result('d-2', 'charge', 1, T0 + 30, 'permanent', 'run', 'unknown'));
    expect(t.dispatch).toEqual([expect.objectContaining({ step: 'charge', kind: 'compensate', effect: 'unknown' })]);

    const v = setup();
    await v.create('d-3');
    applied(await v.result('d-3', 'reserve', 1, T0 + 10, 'ok'));
    applied(await v.result('d-3', 'fraud', 1, T0 + 20, 'ok'));
    const w = applied(await v.result('d-3', 'charge', 1, T0 + 30, 'permanent', 'run', 'none'));
    expect(w.dispatch).toEqual([expect.objectContaining({ step: 'reserve', kind: 'compensate' })]);
  });

  it('a breaker refusal does not make a step in doubt, but an earlier timed-out attempt does (the effect only moves up)', async () => {
    const u = setup();
    await u.create('d-4');
    applied(await u.result('d-4', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('d-4', 'fraud', 1, T0 + 20, 'ok'));
    // Attempt 1 times out (unknown), attempt 2 is refused by the breaker (none): still unknown.
    const retried = await u.store.expireStep('d-4', 'charge', T0 + 1_020, 1);
    // maxFailures 1 gives up at once here; use a plan with room for a retry instead.
    expect(retried.action).toBe('compensate');
    expect((await u.store.getTask('d-4'))?.steps.find((s) => s.name === 'charge')?.effect).toBe('unknown');

    const roomy = compilePlan(
      validateDefinition({
        name: 'orders',
        onFailure: 'compensate',
        defaults: { ladder: { retries: 1, longBackoffMs: 100, maxFailures: 3, maxCircuitOpen: 5 } },
        steps: [{ name: 'charge', agent: 'payment', budgetMs: 1_000, compensate: { agent: 'payment', budgetMs: 500 } }],
      }),
    );
    const v = setup(roomy);
    await v.create('d-5');
    expect((await v.store.expireStep('d-5', 'charge', T0 + 1_000, 1)).action).toBe('retry');
    const refused = await v.store.applyResult({
      lease: HELD,
      taskId: 'd-5',
      step: 'charge',
      kind: 'run',
      attempt: 2,
      now: T0 + 1_010,
      schedulerId: 's',
      agentId: 'a',
      agentType: 'payment',
      outcome: { ok: false, message: 'breaker open', retryable: true, circuitOpenRetryAfterMs: 50, effect: 'none' },
    });
    expect(applied(refused).events.map((e) => e.type)).toEqual(['step_parked']);
    const c = await v.cancel('d-5', T0 + 1_020);
    // Parked: abandoned at once, and compensated because attempt 1 may have taken effect.
    expect(c.events.map((e) => [e.type, e.step])).toEqual([
      ['step_abandoned', 'charge'],
      ['compensating', undefined],
      ['compensation_started', 'charge'],
    ]);
    expect(c.dispatch).toEqual([expect.objectContaining({ step: 'charge', kind: 'compensate', effect: 'unknown' })]);
  });

  it('orders in-doubt steps by their start and completed ones by their completion, latest first', async () => {
    // a and b in parallel; a completes at T0+10; b (in doubt) started at T0 and c started at T0+10 after a.
    const p = compilePlan(
      validateDefinition({
        name: 'orders',
        onFailure: 'compensate',
        defaults: { ladder: { retries: 0, longBackoffMs: 100, maxFailures: 1 } },
        steps: [
          { name: 'a', agent: 'x', budgetMs: 1_000, compensate: { agent: 'x', budgetMs: 100 } },
          { name: 'b', agent: 'x', budgetMs: 5_000, compensate: { agent: 'x', budgetMs: 100 } },
          { name: 'c', agent: 'x', budgetMs: 1_000, dependsOn: ['a'], compensate: { agent: 'x', budgetMs: 100 } },
        ],
      }),
    );
    const u = setup(p);
    await u.create('o-1');
    applied(await u.result('o-1', 'a', 1, T0 + 10, 'ok'));
    // c fails permanently (in doubt); the undo waits for b, in flight.
    const t = applied(await u.result('o-1', 'c', 1, T0 + 20, 'permanent', 'run', 'unknown'));
    expect(t.dispatch).toEqual([]);
    // b's complete-by passes: in doubt too. Order: c (started T0+10), a (completed T0+10, tie: in doubt first), b (started T0).
    const x = await u.store.expireStep('o-1', 'b', T0 + 5_000, 1);
    expect(x.dispatch.map((d) => d.step)).toEqual(['c']);
    const order: string[] = ['c'];
    let step = 'c';
    for (let i = 0; i < 3; i++) {
      const next = applied(await u.result('o-1', step, 1, T0 + 5_010 + i, 'ok', 'compensate'));
      if (next.dispatch.length === 0) {
        expect(next.status).toBe('compensated');
        break;
      }
      step = next.dispatch[0]!.step;
      order.push(step);
    }
    expect(order).toEqual(['c', 'a', 'b']);
  });
});

describe('the alert is recorded by the transition that needs it', () => {
  it('a compensation that fails for good ends the task compensation_failed and records its alert', async () => {
    const u = setup();
    await u.create('a-1');
    applied(await u.result('a-1', 'reserve', 1, T0 + 10, 'ok'));
    applied(await u.result('a-1', 'fraud', 1, T0 + 20, 'ok'));
    applied(await u.result('a-1', 'charge', 1, T0 + 30, 'permanent', 'run', 'none'));
    const t = applied(await u.result('a-1', 'reserve', 1, T0 + 40, 'permanent', 'compensate'));
    expect(t.status).toBe('compensation_failed');
    expect(await u.store.openAlerts()).toEqual([
      { id: 'a-1:reserve:compensation_failed:1', kind: 'compensation_failed', taskId: 'a-1', step: 'reserve', failureCount: 0, lastError: 'reserve permanent', raisedAt: T0 + 40 },
    ]);
    const pending = await u.store.pendingAlerts(10);
    expect(pending.map((p) => p.alert.id)).toEqual(['a-1:reserve:compensation_failed:1']);
    await u.store.alertsPublished(pending);
    expect(await u.store.pendingAlerts(10)).toEqual([]);
    // Published alerts stay open until the operator's retry closes them.
    expect(await u.store.openAlerts()).toHaveLength(1);
  });
});
