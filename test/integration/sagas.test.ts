// Sagas on real processes: a task that fails for good is undone — the compensations of the steps that
// may have taken effect (completed, or in doubt) run in reverse order, each a supervised step of its
// own; a compensation that fails is retried, one that fails for good raises an alert and can be retried
// by an operator; cancel stops a running task, waits for the step in flight and undoes it too; a task
// keeps the workflow version it started with; retention removes finished tasks and leaves running ones,
// and compacts those that can never be retried.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, type TaskEvent, type TaskState, type WorkflowDefinitionInput } from '@triad/protocol';
import { keys } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { ROOT, SCRIPTS, cli, startTriad, type TestTriad } from '../support/triad.js';
import type { SagaInput } from '../support/saga-agents.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const fast = { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 2, longBackoffMs: 200, maxFailures: 3 } };
const undo = { agent: 'worker', budgetMs: 2_000 };

/** s1 → s2 → s3 → s4, every step undoable. */
const linear: WorkflowDefinitionInput = {
  name: 'linear',
  onFailure: 'compensate',
  defaults: fast,
  steps: ['s1', 's2', 's3', 's4'].map((name, i, all) => ({ name, agent: 'worker', budgetMs: 10_000, compensate: undo, dependsOn: i === 0 ? [] : [all[i - 1]!] })),
};

/** a → (b ∥ c) → d */
const diamond: WorkflowDefinitionInput = {
  name: 'diamond',
  onFailure: 'compensate',
  defaults: fast,
  steps: [
    { name: 'a', agent: 'worker', budgetMs: 3_000, compensate: undo },
    { name: 'b', agent: 'worker', budgetMs: 3_000, compensate: undo, dependsOn: ['a'] },
    { name: 'c', agent: 'worker', budgetMs: 3_000, compensate: undo, dependsOn: ['a'] },
    { name: 'd', agent: 'worker', budgetMs: 3_000, compensate: undo, dependsOn: ['b', 'c'] },
  ],
};

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 100, leaseMs: 2_000 } });
  await t.startSagaAgents();
  await t.client.registerWorkflow(linear);
  await t.client.registerWorkflow(diamond);
});

async function run(workflow: string, input: SagaInput): Promise<{ state: TaskState; events: TaskEvent[] }> {
  const events: TaskEvent[] = [];
  const state = await t.client.run(workflow, input, { timeoutMs: 45_000, onEvent: (e) => events.push(e) });
  return { state, events };
}

const key = (taskId: string, step: string): string => `${t.namespace}/${taskId}/${step}`;
const stepsOf = (s: TaskState): Record<string, string> => Object.fromEntries(s.steps.map((x) => [x.name, x.status]));
const undoneOrder = (events: TaskEvent[]): string[] => events.filter((e) => e.type === 'compensation_done').map((e) => e.step!);

describe('compensation', () => {
  it.each([
    ['s1', []],
    ['s2', ['s1']],
    ['s3', ['s2', 's1']],
    ['s4', ['s3', 's2', 's1']],
  ])('a permanent failure at %s undoes exactly the completed steps, in reverse order', async (failAt, expected) => {
    const { state, events } = await run('linear', { failAt });
    expect(state.status).toBe('compensated');
    expect(undoneOrder(events)).toEqual(expected);
    const statuses = stepsOf(state);
    expect(statuses[failAt]).toBe('failed');
    for (const s of expected) expect(statuses[s]).toBe('compensated');
    // The ledger agrees: every completed step's effect was undone, later than the one after it.
    const effects = new Map(t.ledger.effects().map((e) => [e.idempotencyKey, e]));
    for (const s of expected) expect(effects.get(key(state.taskId, s))?.undone, `effect of ${s} undone`).toBe(true);
    expect(effects.has(key(state.taskId, failAt))).toBe(false);
    const undoneAt = expected.map((s) => Date.parse(effects.get(key(state.taskId, s))!.undoneAt!));
    expect([...undoneAt].sort((x, y) => x - y)).toEqual(undoneAt);
  });

  it('a step that keeps timing out climbs the ladder; at its last rung the supervisor begins the undo, which undoes it too (in doubt)', async () => {
    await t.client.registerWorkflow({
      name: 'slow',
      onFailure: 'compensate',
      defaults: { retry: fast.retry, ladder: { retries: 1, longBackoffMs: 100, maxFailures: 2 } },
      steps: [
        { name: 's1', agent: 'worker', budgetMs: 3_000, compensate: undo },
        { name: 's2', agent: 'worker', budgetMs: 400, compensate: undo, dependsOn: ['s1'] },
      ],
    });
    const { state, events } = await run('slow', { delayMs: { s2: 60_000 } });
    expect(state.status).toBe('compensated');
    // s2's attempts timed out after its agent took them: they may have taken effect, so s2 is undone
    // first (decision 0009), then s1.
    expect(stepsOf(state)).toMatchObject({ s1: 'compensated', s2: 'compensated' });
    expect(state.steps[1]).toMatchObject({ failureCount: 2, effect: 'unknown' });
    expect(events.filter((e) => e.step === 's2').map((e) => e.type)).toEqual(['step_started', 'step_retried', 'step_error', 'compensation_started', 'compensation_done']);
    expect(undoneOrder(events)).toEqual(['s2', 's1']);
    // Here the effect never happened (the handler was aborted): the undo left a tombstone.
    expect(t.ledger.effects().find((e) => e.idempotencyKey === key(state.taskId, 's2'))).toMatchObject({ tombstone: true, applied: false, undone: true });
    // No operator alert: the workflow's policy was to undo, and the undo succeeded.
    expect((await t.client.alerts()).filter((a) => a.taskId === state.taskId)).toEqual([]);
  });

  it('undoes a fan-out in reverse order of completion, not of definition', async () => {
    // c finishes after b; the failure is at d: the undo order is c, b, a.
    const { state, events } = await run('diamond', { failAt: 'd', delayMs: { c: 300 } });
    expect(state.status).toBe('compensated');
    expect(undoneOrder(events)).toEqual(['c', 'b', 'a']);
    const order = Object.fromEntries(state.steps.map((s) => [s.name, s.order]));
    expect(order['c']!).toBeGreaterThan(order['b']!);
  });

  it('retries a compensation that fails once (a supervised step of its own) and finishes the undo', async () => {
    const { state, events } = await run('linear', { failAt: 's3', compFail: { step: 's2', mode: 'once' } });
    expect(state.status).toBe('compensated');
    expect(undoneOrder(events)).toEqual(['s2', 's1']);
    const s2 = state.steps.find((s) => s.name === 's2')!;
    expect(s2.compensation?.attempt).toBe(2);
    expect(s2.compensation?.failureCount).toBe(1);
    expect(t.ledger.effects().find((e) => e.idempotencyKey === key(state.taskId, 's2'))?.undone).toBe(true);
  });

  it('a compensation that fails for good ends the task compensation_failed with one alert; triad retry finishes the undo', async () => {
    const { state } = await run('linear', { failAt: 's3', compFail: { step: 's2', mode: 'always' } });
    expect(state.status).toBe('compensation_failed');
    expect(stepsOf(state)).toMatchObject({ s1: 'processed', s2: 'compensation_failed', s3: 'failed', s4: 'pending' });
    const alerts = await waitFor(async () => {
      const a = (await t.client.alerts()).filter((x) => x.taskId === state.taskId);
      return a.length > 0 ? a : undefined;
    }, { timeoutMs: 10_000, what: 'the compensation alert' });
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ kind: 'compensation_failed', step: 's2' });
    // The operator fixes the cause (here: the input that scripts the failure) and retries the compensation.
    const r = await cli(t, ['retry', state.taskId, '--input', JSON.stringify({ failAt: 's3' })]);
    expect(r.code, r.stderr).toBe(0);
    const after = await t.client.wait(state.taskId, { timeoutMs: 30_000 });
    expect(after.status).toBe('compensated');
    expect(stepsOf(after)).toMatchObject({ s1: 'compensated', s2: 'compensated', s3: 'failed' });
    expect((await t.client.alerts()).filter((x) => x.taskId === state.taskId)).toEqual([]);
  });
});

describe('cancel', () => {
  it('stops a running task in the middle: nothing new starts, the undo waits for the step in flight and undoes it too', async () => {
    // s2 takes 6 s: the cancel (through the CLI, a new process) surely lands while it runs.
    const { taskId } = await t.client.submit('linear', { delayMs: { s2: 6_000 } } satisfies SagaInput);
    await waitFor(async () => (await t.client.getTask(taskId)).steps[1]!.status === 'processing' || undefined, { timeoutMs: 10_000, what: 's2 to start' });
    const r = await cli(t, ['cancel', taskId, '--reason', 'customer withdrew', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const events: TaskEvent[] = [];
    const state = await t.client.wait(taskId, { timeoutMs: 30_000, onEvent: (e) => events.push(e) });
    expect(state.status).toBe('cancelled');
    // s2 finished after the cancel: its effect happened, so it is undone first (decision 0009); s3 never started.
    expect(stepsOf(state)).toMatchObject({ s1: 'compensated', s2: 'compensated', s3: 'pending', s4: 'pending' });
    expect(undoneOrder(events)).toEqual(['s2', 's1']);
    expect(events.some((e) => e.type === 'compensating' && e.reason === 'customer withdrew')).toBe(true);
    expect(events.findIndex((e) => e.type === 'step_done' && e.step === 's2')).toBeGreaterThan(events.findIndex((e) => e.type === 'compensating'));
    // The ledger agrees: both effects applied and undone, nothing left behind.
    const effects = new Map(t.ledger.effects().map((e) => [e.idempotencyKey, e]));
    for (const s of ['s1', 's2']) expect(effects.get(key(taskId, s)), `effect of ${s}`).toMatchObject({ applied: true, undone: true, reversals: 1 });
    expect(effects.has(key(taskId, 's3'))).toBe(false);
    // Cancelling it again is refused with the reason.
    const again = await cli(t, ['cancel', taskId]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/only a running task can be cancelled/);
  });
});

describe('versions and retention', () => {
  it('a running task keeps the version it started with when a new version is registered', async () => {
    const v1 = await t.client.registerWorkflow({ name: 'pinned', defaults: fast, steps: [{ name: 'one', agent: 'worker', budgetMs: 5_000 }] });
    const { taskId } = await t.client.submit('pinned', { delayMs: { one: 800 } } satisfies SagaInput);
    // The version is pinned when a scheduler accepts the task; register v2 once it has.
    await waitFor(() => t.client.getTask(taskId).then((s) => s.version === v1.version, () => undefined), { timeoutMs: 10_000, what: 'the task to start' });
    const v2 = await t.client.registerWorkflow({
      name: 'pinned',
      defaults: fast,
      steps: [
        { name: 'one', agent: 'worker', budgetMs: 5_000 },
        { name: 'two', agent: 'worker', budgetMs: 5_000, dependsOn: ['one'] },
      ],
    });
    expect(v2.version).toBe(v1.version + 1);
    const old = await t.client.wait(taskId, { timeoutMs: 30_000 });
    expect(old.version).toBe(v1.version);
    expect(old.steps.map((s) => s.name)).toEqual(['one']);
    const fresh = await t.client.run('pinned', {}, { timeoutMs: 30_000 });
    expect(fresh.version).toBe(v2.version);
    expect(fresh.steps.map((s) => s.name)).toEqual(['one', 'two']);
    // A task may also pin an older version explicitly.
    const explicit = await t.client.run('pinned', {}, { version: v1.version, timeoutMs: 30_000 });
    expect(explicit.steps.map((s) => s.name)).toEqual(['one']);
    expect((await t.client.listWorkflows()).find((w) => w.name === 'pinned')?.versions).toEqual([v1.version, v2.version]);
  });

  it('retention removes finished tasks after their time and leaves running ones', async () => {
    // A Triad of its own whose retention is 3 s (the others keep the default, a day).
    const r = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 100, leaseMs: 2_000, retentionMs: 3_000 } });
    await r.startSagaAgents();
    await r.client.registerWorkflow(linear);
    const done = await r.client.run('linear', {}, { timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    const { taskId: running } = await r.client.submit('linear', { delayMs: { s1: 8_000 } } satisfies SagaInput);
    await waitFor(
      async () => (await r.client.getTask(done.taskId).then(() => undefined, (e: { code?: string }) => e.code === ErrorCode.UnknownTask || undefined)),
      { timeoutMs: 15_000, what: 'the finished task to be removed' },
    );
    const still = await r.client.getTask(running);
    expect(still.status).toBe('running');
    expect((await r.client.listTasks({ limit: 1000 })).map((x) => x.taskId)).not.toContain(done.taskId);
    expect(await r.redis.exists(keys(r.namespace).task(done.taskId))).toBe(0);
  });

  it('with compactAfterMs 0 the leader compacts completed and compensated tasks; the client and triad status still show them', async () => {
    const r = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 100, leaseMs: 2_000, compactAfterMs: 0 } });
    await r.startSagaAgents();
    await r.client.registerWorkflow(linear);
    const done = await r.client.run('linear', {}, { timeoutMs: 30_000 });
    const undone = await r.client.run('linear', { failAt: 's3' } satisfies SagaInput, { timeoutMs: 45_000 });
    expect([done.status, undone.status]).toEqual(['completed', 'compensated']);
    const taskKey = (id: string): string => keys(r.namespace).task(id);
    await waitFor(async () => ((await r.redis.hget(taskKey(done.taskId), 'c')) === '1' && (await r.redis.hget(taskKey(undone.taskId), 'c')) === '1') || undefined, {
      timeoutMs: 15_000,
      what: 'both finished tasks to be compacted',
    });
    expect(await r.redis.object('ENCODING', taskKey(done.taskId))).toBe('listpack');
    expect(await Promise.all(keys(r.namespace).buckets.map((b) => r.redis.zcard(b.compact)))).toEqual(keys(r.namespace).buckets.map(() => 0));
    expect(await r.redis.hexists(taskKey(done.taskId), 'plan')).toBe(0);

    // What survives compaction reads back as it was (`done` may itself have been read before or after it).
    const view = (s: TaskState) => s.steps.map((x) => [x.name, x.agent, x.status, x.attempt, x.startedAt, x.finishedAt, x.output, x.compensation?.attempt, x.compensation?.finishedAt]);
    for (const before of [done, undone]) {
      const after = await r.client.getTask(before.taskId);
      expect(after).toMatchObject({ status: before.status, compacted: true, createdAt: before.createdAt, finishedAt: before.finishedAt, updatedAt: before.finishedAt, seq: before.seq });
      expect(view(after)).toEqual(view(before));
    }
    expect(stepsOf(await r.client.getTask(undone.taskId))).toEqual({ s1: 'compensated', s2: 'compensated', s3: 'failed', s4: 'pending' });

    const status = await cli(r, ['status', done.taskId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/status:\s+completed/);
    expect(status.stdout).toMatch(/record:\s+compacted by retention/);
    for (const step of ['s1', 's2', 's3', 's4']) expect(status.stdout).toMatch(new RegExp(`^${step}\\s+worker\\s+processed\\s+1`, 'm'));
    const json = await cli(r, ['status', undone.taskId, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ taskId: undone.taskId, status: 'compensated', compacted: true });
    await waitFor(async () => ((await r.client.supervisorStatus()).supervisors.some((x) => x.compacted >= 2) ? true : undefined), { timeoutMs: 5_000, what: 'the supervisor to report its compactions' });
    const sup = await cli(r, ['supervisor']);
    expect(sup.code, sup.stderr).toBe(0);
    expect(sup.stdout).toMatch(/PURGED\s+COMPACTED\s+FENCED/);
    const leaderRow = sup.stdout.split('\n').find((l) => /\byes\b/.test(l));
    expect(leaderRow, sup.stdout).toBeDefined();
  });

  it('refuses an invalid TRIAD_COMPACT_AFTER_MS with what was wrong and what to set', async () => {
    const out = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(process.execPath, [SCRIPTS.supervisor], { cwd: ROOT, env: { ...t.env, TRIAD_COMPACT_AFTER_MS: 'soon' }, timeout: 30_000 }, (error, _stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stderr }),
      );
    });
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/TRIAD_COMPACT_AFTER_MS must be a number of milliseconds \(got "soon"\); set it to .*0 = on the next sweep/);
  });
});
