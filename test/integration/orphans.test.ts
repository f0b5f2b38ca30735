// Sagas leave no orphan effects (decision 0009), checked on the services' ledgers, not only on task
// states: a cancel while a charge is in flight refunds it; a step that timed out while its service
// applied it late is undone; an undo that reaches the service before the late apply leaves a tombstone
// that refuses it; an agent killed in the middle of an undo leaves nothing undone twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskEvent, TaskState } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { checkLedgers } from '../support/ledger.js';
import { cli, fastExampleOrders, startTriad, type TestTriad } from '../support/triad.js';
import { waitForCall, waitForStep } from '../support/waits.js';
import { ordersWorkflow } from '@triad/example-orders';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
});

const key = (t: TestTriad, taskId: string, step: string): string => `${t.namespace}/${taskId}/${step}`;
const effectOf = (t: TestTriad, service: 'payment' | 'inventory' | 'shipping', taskId: string, step: string) =>
  t.services[service].effects().find((e) => e.idempotencyKey === key(t, taskId, step));
const undoneOrder = (events: TaskEvent[]): string[] => events.filter((e) => e.type === 'compensation_done').map((e) => e.step!);

describe('an undo leaves no effect behind', () => {
  it('five orders cancelled with `triad cancel` while their charge is in flight: every charge is refunded', async () => {
    // The scenario: the payment service takes 15 s per call, and each order is cancelled from the
    // CLI as soon as an agent is charging it (the example's workflow, its charge given room for the 15 s).
    // 15 s: five CLI processes must start and send their cancel while the charges are still in flight,
    // on a machine that may be busy.
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, faults: { payment: { latencyMs: 15_000 } } });
    const base = ordersWorkflow.toJSON();
    await t.client.registerWorkflow({ ...base, steps: base.steps.map((s) => (s.name === 'charge' ? { ...s, budgetMs: 30_000 } : s)) });
    const ids = await Promise.all(Array.from({ length: 5 }, (_, i) => t.client.submit('orders', { orderId: `cancel-${i}`, amount: 20 + i }).then((s) => s.taskId)));
    await Promise.all(
      ids.map(async (id) => {
        await waitForCall(t, id, 'charge');
        const r = await cli(t, ['cancel', id, '--reason', 'customer withdrew']);
        expect(r.code, r.stderr).toBe(0);
      }),
    );
    // The charges already in the service keep their 15 s; the refunds that follow are quick.
    t.services.payment.setFaults({ latencyMs: 0 });
    const states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 45_000 })));
    for (const s of states) {
      expect(s.status).toBe('cancelled');
      // The charge finished after the cancel: it was waited for, then refunded before the release.
      expect(Object.fromEntries(s.steps.map((x) => [x.name, x.status]))).toEqual({ reserve: 'compensated', fraud: 'processed', approval: 'skipped', charge: 'compensated', ship: 'pending' });
      expect(s.steps.find((x) => x.name === 'charge')!.compensation!.finishedAt!).toBeLessThanOrEqual(s.steps.find((x) => x.name === 'reserve')!.compensation!.startedAt!);
      expect(effectOf(t, 'payment', s.taskId, 'charge')).toMatchObject({ applied: true, undone: true, reversals: 1 });
      expect(effectOf(t, 'inventory', s.taskId, 'reserve')).toMatchObject({ applied: true, undone: true, reversals: 1 });
    }
    expect(checkLedgers(t.namespace, t.services, ordersWorkflow.toJSON(), states)).toEqual({ orphans: [], wrongUndos: [], duplicates: [] });
  }, 120_000);

  it('a charge whose attempts all time out while the service applies them late: the task is undone and the late charge refunded', async () => {
    // Every payment call takes 1.5 s against a 1 s budget: each attempt times out, but the first call
    // lands at 1.5 s, before the second attempt times out and the undo begins.
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, supervisor: { intervalMs: 100, leaseMs: 2_000 }, faults: { payment: { latencyMs: 1_500 } } });
    await t.client.registerWorkflow(
      fastExampleOrders({ budgetMs: 1_000, compensateBudgetMs: 3_000, retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 1, longBackoffMs: 100, maxFailures: 2 } }),
    );
    const { taskId } = await t.client.submit('orders', { orderId: 'late-1', amount: 31 });
    const events: TaskEvent[] = [];
    const state = await t.client.wait(taskId, { timeoutMs: 30_000, onEvent: (e) => events.push(e) });
    expect(state.status).toBe('compensated');
    expect(state.steps.find((x) => x.name === 'charge')).toMatchObject({ status: 'compensated', failureCount: 2, effect: 'unknown' });
    expect(undoneOrder(events)).toEqual(['charge', 'reserve']);
    // The late charge happened and was refunded once; a refund issued before it landed would have left
    // a tombstone that refused it instead. Either way nothing is left charged.
    const charge = effectOf(t, 'payment', taskId, 'charge');
    expect(charge?.undone).toBe(true);
    expect(charge?.reversals ?? 0).toBeLessThanOrEqual(1);
    expect(checkLedgers(t.namespace, t.services, fastExampleOrders({ budgetMs: 1, retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: {} }), [state])).toEqual({
      orphans: [],
      wrongUndos: [],
      duplicates: [],
    });
  });

  it('an undo that reaches the service before the late apply leaves a tombstone: the late charge is refused', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, supervisor: { intervalMs: 100, leaseMs: 2_000 } });
    // One attempt only: its time-out ends the ladder, and the undo starts at once.
    await t.client.registerWorkflow(
      fastExampleOrders({ budgetMs: 1_000, compensateBudgetMs: 3_000, retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 0, longBackoffMs: 100, maxFailures: 1 } }),
    );
    // The charge's call waits 4 s in the service; once it is surely there, calls are fast again, so the
    // refund (about 1 s later, when the attempt times out) reaches the service long before the charge lands.
    t.services.payment.setFaults({ latencyMs: 4_000 });
    const { taskId } = await t.client.submit('orders', { orderId: 'tomb-1', amount: 32 });
    await waitFor(() => t.services.payment.waiting().some((c) => c.path === '/apply' && c.idempotencyKey === key(t, taskId, 'charge')) || undefined, {
      timeoutMs: 15_000,
      what: 'the charge call to reach the payment service',
    });
    t.services.payment.setFaults({ latencyMs: 0 });
    const state = await t.client.wait(taskId, { timeoutMs: 30_000 });
    expect(state.status).toBe('compensated');
    expect(state.steps.find((x) => x.name === 'charge')).toMatchObject({ status: 'compensated', effect: 'unknown' });
    // The late apply arrives after the undo and is refused by the tombstone.
    const charge = await waitFor(() => {
      const e = effectOf(t, 'payment', taskId, 'charge');
      return e && e.lateApplies > 0 ? e : undefined;
    }, { timeoutMs: 15_000, what: 'the late charge to reach the payment service and be refused', lastSeen: () => JSON.stringify(effectOf(t, 'payment', taskId, 'charge')) });
    expect(charge).toMatchObject({ tombstone: true, applied: false, undone: true, lateApplies: 1, reversals: 0 });
  });

  it('an agent killed while it undoes a charge: the refund is retried by another and applied once', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, supervisor: { intervalMs: 100, leaseMs: 2_000 }, faults: { shipping: { failRate: 1, latencyMs: 1_000 } } });
    // ship fails for good after 1 s (time for the test to see the charge done and slow the payment
    // service before the undo starts); the refund then takes 1.5 s against a 1 s budget the first time.
    await t.client.registerWorkflow(
      fastExampleOrders({
        budgetMs: 2_000,
        compensateBudgetMs: 1_000,
        retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 },
        // The refund's ladder outlasts the agents' restart on a loaded machine (each attempt without an
        // agent expires after 1 s and counts); four failures gave up before the new agents served.
        ladder: { retries: 3, longBackoffMs: 500, maxFailures: 30 },
        steps: { ship: { ladder: { retries: 0, longBackoffMs: 100, maxFailures: 1 } } },
      }),
    );
    const { taskId } = await t.client.submit('orders', { orderId: 'kill-undo-1', amount: 33 });
    await waitForStep(t, taskId, 'charge', (s) => s.status === 'processed', 'the charge to complete');
    t.services.payment.setFaults({ latencyMs: 1_500 });
    await waitForCall(t, taskId, 'charge', { kind: 'compensate' });
    await t.agents[0]!.kill('SIGKILL');
    t.services.payment.setFaults({ latencyMs: 0 });
    await t.startAgents();
    const state: TaskState = await t.client.wait(taskId, { timeoutMs: 30_000 });
    expect(state.status).toBe('compensated');
    const charge = state.steps.find((x) => x.name === 'charge')!;
    expect(charge.status).toBe('compensated');
    expect(charge.compensation!.attempt).toBeGreaterThanOrEqual(2);
    // The dead agent's refund may have landed too; under one undo key it is applied once.
    expect(effectOf(t, 'payment', taskId, 'charge')).toMatchObject({ applied: true, undone: true, reversals: 1 });
    expect(effectOf(t, 'inventory', taskId, 'reserve')).toMatchObject({ applied: true, undone: true, reversals: 1 });
  });
});
