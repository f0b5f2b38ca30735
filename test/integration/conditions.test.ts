// Conditions on real processes (decision 0019, increment 3): a workflow registered from JSON with the CLI
// whose `review` step runs only for large amounts. With a small amount the step is skipped (no agent is
// called for it: the ledger has no effect under its key), the steps after it run, and `triad status`
// shows why; with a large amount it runs; when a later step fails for good, the undo compensates the
// steps that ran and never the skipped one.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskState, WorkflowDefinitionInput } from '@triad/protocol';
import { startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const undo = { agent: 'worker', budgetMs: 2_000 };
/** reserve → review (amount > 1000) → charge → ship; every step undoable. */
const gated: WorkflowDefinitionInput = {
  name: 'gated',
  onFailure: 'compensate',
  defaults: { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 1, longBackoffMs: 200, maxFailures: 2 } },
  steps: [
    { name: 'reserve', agent: 'worker', budgetMs: 5_000, compensate: undo },
    { name: 'review', agent: 'worker', budgetMs: 5_000, compensate: undo, dependsOn: ['reserve'], when: { input: 'amount', gt: 1000 } },
    { name: 'charge', agent: 'worker', budgetMs: 5_000, compensate: undo, dependsOn: ['review'], needs: ['review'] },
    { name: 'ship', agent: 'worker', budgetMs: 5_000, compensate: undo, dependsOn: ['charge'] },
  ],
};

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 100, leaseMs: 2_000 } });
  await t.startSagaAgents();
  // Registered as a user does: a JSON file, through the CLI.
  const file = join(mkdtempSync(join(tmpdir(), 'triad-conditions-')), 'gated.workflow.json');
  writeFileSync(file, JSON.stringify(gated));
  const reg = await cli(t, ['workflows', 'register', file]);
  expect(reg.code, reg.stderr).toBe(0);
});

const key = (taskId: string, step: string): string => `${t.namespace}/${taskId}/${step}`;
const statuses = (s: TaskState): Record<string, string> => Object.fromEntries(s.steps.map((x) => [x.name, x.status]));

describe('conditions', () => {
  it('skips a step whose condition is false, runs the steps after it, and triad status says why', async () => {
    const state = await t.client.run('gated', { amount: 10 }, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    expect(statuses(state)).toEqual({ reserve: 'processed', review: 'skipped', charge: 'processed', ship: 'processed' });
    expect(state.steps.find((s) => s.name === 'review')).toMatchObject({ attempt: 0, reason: 'amount 10 is not > 1000', effect: 'none' });
    const applied = new Set(t.ledger.effects().map((e) => e.idempotencyKey));
    expect(applied.has(key(state.taskId, 'review'))).toBe(false);
    for (const s of ['reserve', 'charge', 'ship']) expect(applied.has(key(state.taskId, s)), s).toBe(true);

    const status = await cli(t, ['status', state.taskId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^review\s+worker\s+skipped\s.*skipped: amount 10 is not > 1000$/m);
    const events = await cli(t, ['watch', state.taskId]);
    expect(events.stdout).toMatch(/step_skipped\s+review\s+amount 10 is not > 1000/);
  });

  it('runs the step when its condition holds', async () => {
    const state = await t.client.run('gated', { amount: 1500 }, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    expect(statuses(state)).toEqual({ reserve: 'processed', review: 'processed', charge: 'processed', ship: 'processed' });
    expect(t.ledger.effects().some((e) => e.idempotencyKey === key(state.taskId, 'review'))).toBe(true);
  });

  it('never compensates a skipped step: the undo compensates the steps that ran', async () => {
    const state = await t.client.run('gated', { amount: 5, failAt: 'ship' }, { timeoutMs: 30_000 });
    expect(state.status).toBe('compensated');
    expect(statuses(state)).toEqual({ reserve: 'compensated', review: 'skipped', charge: 'compensated', ship: 'failed' });
    expect(state.steps.find((s) => s.name === 'review')?.compensation).toBeUndefined();
    const effects = new Map(t.ledger.effects().map((e) => [e.idempotencyKey, e]));
    expect(effects.get(key(state.taskId, 'reserve'))?.undone).toBe(true);
    expect(effects.get(key(state.taskId, 'charge'))?.undone).toBe(true);
    expect(effects.has(key(state.taskId, 'review'))).toBe(false);
  });
});
