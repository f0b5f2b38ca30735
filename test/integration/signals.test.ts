// Signals on real processes (decision 0019, increment 5): a workflow registered from JSON whose approval
// step waits for the signal `approved`. Sent with `triad signal` it completes the order (the signal's data
// is the approval's output, and the step after it got it); without it the wait times out and the order is
// undone (the reservation released); a signal sent before the step waits is kept and taken when it does;
// a repeat with the same id is harmless; a late one is refused with the reason.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SignalReply, TaskState, WorkflowDefinitionInput } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const undo = { agent: 'worker', budgetMs: 2_000 };
/** Long enough for CLI starts on a busy machine: the signal comes in time. */
const APPROVAL_TIMEOUT_MS = 30_000;
const approvals: WorkflowDefinitionInput = {
  name: 'approvals',
  onFailure: 'compensate',
  defaults: { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 } },
  steps: [
    { name: 'reserve', agent: 'worker', budgetMs: 5_000, compensate: undo },
    { name: 'approval', waitFor: { signal: 'approved', timeoutMs: APPROVAL_TIMEOUT_MS }, dependsOn: ['reserve'] },
    { name: 'charge', agent: 'worker', budgetMs: 5_000, compensate: undo, dependsOn: ['approval'], needs: ['approval'] },
  ],
};
/** The same, with a wait that times out soon (nobody signals it). */
const hurried: WorkflowDefinitionInput = { ...approvals, name: 'hurried', steps: approvals.steps.map((s) => (s.waitFor ? { ...s, waitFor: { signal: 'approved', timeoutMs: 3_000 } } : s)) };

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 100, leaseMs: 2_000 } });
  await t.startSagaAgents();
  const file = join(mkdtempSync(join(tmpdir(), 'triad-signals-')), 'approvals.workflow.json');
  writeFileSync(file, JSON.stringify(approvals));
  const reg = await cli(t, ['workflows', 'register', file]);
  expect(reg.code, reg.stderr).toBe(0);
  await t.client.registerWorkflow(hurried);
});

const stepOf = (s: TaskState, name: string) => s.steps.find((x) => x.name === name)!;
const key = (taskId: string, step: string): string => `${t.namespace}/${taskId}/${step}`;

async function waiting(taskId: string): Promise<void> {
  await waitFor(async () => stepOf(await t.client.getTask(taskId), 'approval').status === 'waiting', { timeoutMs: 20_000, what: 'the approval to wait' });
}

describe('signals', () => {
  it('triad signal delivers the approval: the order completes, the signal data is the step output; a repeat is harmless, a late one refused', async () => {
    const { taskId } = await t.client.submit('approvals', {});
    await waiting(taskId);
    const status = await cli(t, ['status', taskId]);
    expect(status.stdout).toMatch(/^approval\s+-\s+waiting\s.*waiting for signal approved until \d\d:\d\d:\d\d \(in /m);

    const sent = await cli(t, ['signal', taskId, 'approved', '--data', '{"approvedBy":"ana"}', '--id', `ok-${taskId}`, '--json']);
    expect(sent.code, sent.stderr).toBe(0);
    expect(JSON.parse(sent.stdout) as SignalReply).toEqual({ taskId, name: 'approved', signalId: `ok-${taskId}`, outcome: 'delivered', step: 'approval' });
    const done = await t.client.wait(taskId, { timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    expect(stepOf(done, 'approval')).toMatchObject({ status: 'processed', output: { approvedBy: 'ana' }, signalId: `ok-${taskId}` });

    const again = await cli(t, ['signal', taskId, 'approved', '--id', `ok-${taskId}`]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/was already accepted .*delivered to step approval.*nothing changed/);
    const late = await cli(t, ['signal', taskId, 'approved']);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/task .* is completed: signals are accepted only while a task is running/);
    const watch = await cli(t, ['watch', taskId]);
    expect(watch.stdout).toMatch(/step_waiting\s+approval\s+signal approved\s+until/);
    expect(watch.stdout).toMatch(/signal_received\s+approval\s+id ok-\S+ from operator delivered to approval/);
  });

  it('without the signal the wait times out and the order is undone', async () => {
    const state = await t.client.run('hurried', {}, { timeoutMs: 30_000 });
    expect(state.status).toBe('compensated');
    expect(stepOf(state, 'approval')).toMatchObject({ status: 'error', error: 'timed out after 3000 ms waiting for signal approved' });
    expect(t.ledger.effects().find((e) => e.idempotencyKey === key(state.taskId, 'reserve'))?.undone).toBe(true);
    expect(t.ledger.effects().some((e) => e.idempotencyKey === key(state.taskId, 'charge'))).toBe(false);
  });

  it('a signal sent before the step waits is kept and taken when it does', async () => {
    const { taskId } = await t.client.submit('approvals', { delayMs: { reserve: 1_500 } });
    // A submission is a task once a scheduler took it.
    await waitFor(async () => (await t.client.getTask(taskId).catch(() => undefined))?.status === 'running', { timeoutMs: 20_000, what: 'the task to exist' });
    const kept = await t.client.signal(taskId, 'approved', { early: true });
    expect(kept.outcome).toBe('buffered');
    expect((await t.client.getTask(taskId)).signals).toEqual([expect.objectContaining({ name: 'approved', signalId: kept.signalId, by: 'operator' })]);
    const done = await t.client.wait(taskId, { timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    expect(stepOf(done, 'approval')).toMatchObject({ output: { early: true }, signalId: kept.signalId });
    expect(done.signals).toBeUndefined();
  });

  it('a signal sent right after the submission (before a scheduler made it a task) is kept, not refused', async () => {
    // Many at once, so some surely reach a scheduler before their submission does.
    const sent = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const { taskId } = await t.client.submit('approvals', {});
        const r = await t.client.signal(taskId, 'approved', { quick: true });
        return { taskId, r };
      }),
    );
    for (const { r } of sent) expect(['buffered', 'delivered']).toContain(r.outcome);
    for (const { taskId } of sent) expect((await t.client.wait(taskId, { timeoutMs: 30_000 })).status).toBe('completed');
  });

  it("the README's waiting-and-branching example is a definition this scheduler registers", async () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const block = /\*\*Workflows that wait and branch\*\*[\s\S]*?```json\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block, 'the README shows the JSON example').toBeDefined();
    const r = await t.client.registerWorkflow(JSON.parse(block ?? '{}') as WorkflowDefinitionInput);
    // Registered (this test runs no inventory or payment agent: the only warnings say so).
    expect(r.name).toBe('approved-orders');
    for (const w of r.warnings) expect(w).toMatch(/^no agent "(inventory|payment|shipping)" has connected/);
  });

  it('refuses a signal no step waits for, naming the ones it does', async () => {
    const { taskId } = await t.client.submit('approvals', {});
    await waiting(taskId);
    const wrong = await cli(t, ['signal', taskId, 'aproved']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/workflow approvals@1 has no step waiting for signal "aproved" \(its signals: approved\)/);
    await t.client.cancel(taskId);
  });
});
