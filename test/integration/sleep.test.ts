// Durable sleeps on real processes (decision 0019, increment 4): a sleep is a deadline in Redis, so it
// survives the loss of every process that knew of it. A task sleeps 8 s between two steps; during the
// sleep the scheduler and both supervisors are killed with SIGKILL, then started again: the sleep ends,
// never before its time (the recorded times), the step after it runs once and the task completes. How
// soon after its time it ends is a measurement (the bench's recovery mode), not asserted here. A cancel
// stops a sleep at once and undoes only what ran.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskState, WorkflowDefinitionInput } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const undo = { agent: 'worker', budgetMs: 2_000 };
const napping: WorkflowDefinitionInput = {
  name: 'napping',
  onFailure: 'compensate',
  defaults: { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 } },
  steps: [
    { name: 'reserve', agent: 'worker', budgetMs: 5_000, compensate: undo },
    // Long enough for `triad status` (a CLI start on a busy machine) and the kills to happen during it.
    { name: 'cool-off', sleep: { ms: 8_000 }, dependsOn: ['reserve'] },
    { name: 'ship', agent: 'worker', budgetMs: 5_000, compensate: undo, dependsOn: ['cool-off'] },
  ],
};

const supervisor = { intervalMs: 200, leaseMs: 1_500 };

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor });
  await t.startSupervisor(supervisor);
  await t.startSagaAgents();
  await t.client.registerWorkflow(napping);
});

const stepOf = (s: TaskState, name: string) => s.steps.find((x) => x.name === name)!;
const key = (taskId: string, step: string): string => `${t.namespace}/${taskId}/${step}`;

describe('durable sleep', () => {
  it('ends after the scheduler and both supervisors are killed -9 during it, and never before its time', async () => {
    const { taskId } = await t.client.submit('napping', {});
    // Asleep: the sleep is recorded with its wake time.
    const asleep = await waitFor(async () => {
      const s = await t.client.getTask(taskId);
      return s && stepOf(s, 'cool-off').status === 'sleeping' ? s : undefined;
    }, { timeoutMs: 20_000, what: 'the task to be sleeping' });
    const sleep = stepOf(asleep, 'cool-off');
    expect(sleep.kind).toBe('sleep');
    expect(sleep.until).toBe(sleep.startedAt! + 8_000);

    const status = await cli(t, ['status', taskId]);
    expect(status.stdout).toMatch(/^cool-off\s+-\s+sleeping\s.*sleeping until \d\d:\d\d:\d\d \(in /m);

    // Every process that knew of the sleep dies.
    await Promise.all([...t.schedulers, ...t.supervisors].map((p) => p.kill('SIGKILL')));
    t.schedulers.length = 0;
    t.supervisors.length = 0;
    await t.startScheduler();
    await t.startSupervisor(supervisor);
    await t.startSupervisor(supervisor);

    const done = await t.client.wait(taskId, { timeoutMs: 40_000 });
    expect(done.status).toBe('completed');
    const woke = stepOf(done, 'cool-off');
    expect(woke.status).toBe('processed');
    // Never before its time: it ended at or after its wake time, and the next step started after that.
    expect(woke.finishedAt!).toBeGreaterThanOrEqual(sleep.until!);
    expect(stepOf(done, 'ship').startedAt!).toBeGreaterThanOrEqual(sleep.until!);
    // The step after it ran once.
    expect(t.ledger.effects().filter((e) => e.idempotencyKey === key(taskId, 'ship'))).toHaveLength(1);
    const events = await cli(t, ['watch', taskId]);
    expect(events.stdout).toMatch(/step_sleeping\s+cool-off\s+until \d\d:\d\d:\d\d/);
  });

  it('a cancel stops a sleep at once and undoes only the step that ran', async () => {
    const { taskId } = await t.client.submit('napping', {});
    await waitFor(async () => {
      const s = await t.client.getTask(taskId);
      return s && stepOf(s, 'cool-off').status === 'sleeping';
    }, { timeoutMs: 20_000, what: 'the task to be sleeping' });
    await t.client.cancel(taskId, 'no longer wanted');
    const end = await t.client.wait(taskId, { timeoutMs: 20_000 });
    expect(end.status).toBe('cancelled');
    expect(stepOf(end, 'cool-off')).toMatchObject({ status: 'abandoned', effect: 'none' });
    expect(stepOf(end, 'ship').status).toBe('pending');
    const effects = new Map(t.ledger.effects().map((e) => [e.idempotencyKey, e]));
    expect(effects.get(key(taskId, 'reserve'))?.undone).toBe(true);
    expect(effects.has(key(taskId, 'ship'))).toBe(false);
  });
});
