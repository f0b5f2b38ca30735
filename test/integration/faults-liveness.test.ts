// Every task ends, whatever a service does (decision 0009): the example's actors one per process, ten
// orders at once, and a shipping service that fails every call (its agent's breaker opens and stays open)
// or that has nothing listening at all. Every order must be undone — the charge refunded, the reservation
// released — and the services' ledgers must agree. That each ends within the bound `triad workflows show`
// prints is a time, measured where times are (`npm run chaos`'s unbounded count, on a quiet machine), not
// asserted on two shared cores here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskState } from '@triad/protocol';
import { freePort, startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { checkLedgers } from '../support/ledger.js';
import { cli, fastExampleOrders, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
});

const SUPERVISION = { intervalMs: 200, leaseMs: 2_000 };
/** Short budgets; a ladder of 3 failures, breaker refusals counted past 2. */
const orders = fastExampleOrders({
  budgetMs: 1_000,
  retry: { maxAttempts: 2, initialDelayMs: 10, maxDelayMs: 20 },
  ladder: { retries: 1, longBackoffMs: 300, maxFailures: 3, maxCircuitOpen: 2 },
});
/** The agents' breaker opens after 2 consecutive failures and half-opens after 1.5 s. */
const BREAKER = { TRIAD_BREAKER_THRESHOLD: '2', TRIAD_BREAKER_HALF_OPEN_MS: '1500' };

interface Shown {
  bounds: { totalMs: number };
}

/** The bound, as an operator reads it: from `triad workflows show --json` with this deployment's supervision. */
async function shownBound(t: TestTriad): Promise<number> {
  const r = await cli(t, ['workflows', 'show', 'orders', '--json', '--sweep-interval-ms', String(SUPERVISION.intervalMs), '--leader-lease-ms', String(SUPERVISION.leaseMs)]);
  expect(r.code, r.stderr).toBe(0);
  const human = await cli(t, ['workflows', 'show', 'orders', '--sweep-interval-ms', String(SUPERVISION.intervalMs)]);
  expect(human.stdout).toMatch(/^ship\s+shipping\s+1s\s+1\/300ms\/3\/2\s+6\.9s \+ 6 sweeps/m);
  return (JSON.parse(r.stdout) as Shown).bounds.totalMs;
}

async function tenOrders(t: TestTriad, tag: string): Promise<{ states: TaskState[] }> {
  await t.client.registerWorkflow(orders);
  const boundMs = await shownBound(t);
  const submitted = await Promise.all(Array.from({ length: 10 }, (_, i) => t.client.submit('orders', { orderId: `${tag}-${i}`, amount: 10 + i })));
  // The bound `triad workflows show` prints sizes the wait generously: a task that never ends fails it;
  // how late one may end is the chaos report's to judge.
  const states = await Promise.all(submitted.map((s) => t.client.wait(s.taskId, { timeoutMs: 3 * boundMs + 30_000 })));
  return { states };
}

/**
 * Every order ended, undone: compensated — or, when a ship attempt expired without a
 * result (its effect then unknown, decision 0010) and the dead shipping service could not take its
 * undo either, compensation_failed with an operator alert, the charge and the reservation left for the
 * operator as the alert says. Returns the orders that were compensated.
 */
async function expectAllEnded(t: TestTriad, states: TaskState[]): Promise<TaskState[]> {
  const alerts = await t.client.alerts();
  for (const s of states) {
    const byName = Object.fromEntries(s.steps.map((x) => [x.name, x]));
    if (s.status === 'compensation_failed') {
      expect(byName['ship'], `${s.taskId}: only an in-doubt shipment can fail its undo`).toMatchObject({ effect: 'unknown', status: 'compensation_failed' });
      expect(alerts.some((a) => a.taskId === s.taskId && a.kind === 'compensation_failed' && a.step === 'ship'), `${s.taskId} has its alert`).toBe(true);
      continue;
    }
    expect(s.status, `${s.taskId}: ${s.error ?? ''}`).toBe('compensated');
    expect(byName['charge']).toMatchObject({ status: 'compensated', effect: 'applied' });
    expect(byName['reserve']).toMatchObject({ status: 'compensated' });
    // The ladder's end, or the give-up time if the breaker's parks took longer than the ladder allows.
    expect(s.error).toMatch(/^step ship (failed 3 times|gave up)/);
  }
  const compensated = states.filter((s) => s.status === 'compensated');
  // Nearly all of them: an expired attempt is an overloaded machine's exception, not the rule.
  expect(compensated.length).toBeGreaterThanOrEqual(8);
  // The ledgers agree: every compensated order's charge refunded once and reservation released; no shipment.
  expect(checkLedgers(t.namespace, t.services, orders, states)).toEqual({ orphans: [], wrongUndos: [], duplicates: [] });
  for (const s of compensated) {
    expect(t.services.payment.effects().find((e) => e.idempotencyKey === `${t.namespace}/${s.taskId}/charge`)).toMatchObject({ applied: true, undone: true, reversals: 1 });
  }
  expect(t.services.shipping.effects().filter((e) => e.applied)).toEqual([]);
  return compensated;
}

describe('a service that never recovers', () => {
  it('shipping fails every call: its breaker opens and stays open, yet every order climbs the ladder and is undone', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: SUPERVISION, faults: { shipping: { failRate: 1 } } });
    await t.startAgents(BREAKER);
    const { states } = await tenOrders(t, 'fail');
    await expectAllEnded(t, states);
    // The breaker did open: ship attempts were refused without calling, and those refusals counted past the limit.
    const refused = states.filter((s) => (s.steps.find((x) => x.name === 'ship')?.circuitCount ?? 0) > 0);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused.some((s) => s.steps.find((x) => x.name === 'ship')!.circuitCount! > 2)).toBe(true);
    // No operator alert where the undo succeeded: the policy was to undo.
    const alerted = new Set((await t.client.alerts()).map((a) => a.taskId));
    for (const s of states) if (s.status === 'compensated') expect(alerted.has(s.taskId)).toBe(false);
  });

  it('shipping has nothing listening at all: every order is undone, and no shipment undo is attempted', async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: SUPERVISION, env: { SHIPPING_URL: nowhere } });
    await t.startAgents(BREAKER);
    const { states } = await tenOrders(t, 'down');
    const compensated = await expectAllEnded(t, states);
    // A refused connection never reached the service: ship's effect is none, so its undo is skipped.
    for (const s of compensated) {
      const ship = s.steps.find((x) => x.name === 'ship');
      expect(ship?.effect).toBe('none');
      expect(ship?.compensation).toBeUndefined();
    }
  });
});
