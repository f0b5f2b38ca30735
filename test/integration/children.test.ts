// Child tasks on real processes (decision 0019 §5, increment 7): a `child` step starts a task of another
// registered workflow and ends with its outcome. A child that completes → the parent continues with its
// output; a child that fails → the parent's step fails and the parent is undone (the child undid itself);
// a parent step after the child that fails → the completed child is undone in its turn; a parent
// cancelled while its child runs → the child is cancelled (its step in flight drains, then it is undone),
// and the parent waits for it before undoing its own steps. The saga worker applies one ledger effect per
// step under the step's idempotency key and undoes it in its compensation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskState, WorkflowDefinitionInput } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const undo = { agent: 'worker', budgetMs: 3_000 };
const defaults = { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 5, longBackoffMs: 300, maxFailures: 8 } };
const shipment: WorkflowDefinitionInput = {
  name: 'shipment',
  onFailure: 'compensate',
  defaults,
  steps: [
    { name: 'pack', agent: 'worker', budgetMs: 10_000, compensate: undo },
    { name: 'send', agent: 'worker', budgetMs: 10_000, dependsOn: ['pack'], compensate: undo },
  ],
};
const ordering: WorkflowDefinitionInput = {
  name: 'ordering',
  onFailure: 'compensate',
  defaults,
  steps: [
    { name: 'reserve', agent: 'worker', budgetMs: 3_000, compensate: undo },
    { name: 'ship-all', child: { workflow: 'shipment', input: 'shipping' }, dependsOn: ['reserve'] },
    { name: 'notify', agent: 'worker', budgetMs: 3_000, dependsOn: ['ship-all'], needs: ['ship-all'] },
  ],
};

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 200, leaseMs: 1_500 } });
  await t.startSagaAgents();
  await t.client.registerWorkflow(shipment);
  await t.client.registerWorkflow(ordering);
});

const stepOf = (s: TaskState, name: string) => s.steps.find((x) => x.name === name)!;
const key = (taskId: string, step: string): string => `${t.namespace}/${taskId}/${step}`;
const effect = (taskId: string, step: string) => t.ledger.effects().find((e) => e.idempotencyKey === key(taskId, step));
/** When a step's effect was undone (epoch ms; NaN when it was not). */
const undoneAt = (taskId: string, step: string): number => Date.parse(effect(taskId, step)?.undoneAt ?? '');

describe('child tasks', () => {
  it('a child that completes: the parent step ends with its output and the parent continues', async () => {
    const { taskId } = await t.client.submit('ordering', { shipping: { to: 'Lyon' } });
    const done = await t.client.wait(taskId, { timeoutMs: 40_000 });
    expect(done.status).toBe('completed');
    const childId = `${taskId}:ship-all:1`;
    const ship = stepOf(done, 'ship-all');
    expect(ship).toMatchObject({ kind: 'child', status: 'processed', effect: 'applied', child: { taskId: childId, workflow: 'shipment', op: 'start', ended: 'completed' } });
    const child = await t.client.getTask(childId);
    expect(child).toMatchObject({ status: 'completed', workflow: 'shipment', parent: { taskId, step: 'ship-all' }, client: done.client });
    // The child's input is the parent's `shipping`; its output, the map of its last step's output, is the step's.
    expect(child.input).toEqual({ to: 'Lyon' });
    expect(ship.output).toEqual({ send: stepOf(child, 'send').output });
    expect(child.output).toEqual(ship.output);
    // Each child step applied once under the child's own keys; the parent's next step ran once.
    for (const s of ['pack', 'send']) expect(effect(childId, s)).toMatchObject({ applied: true, calls: 1, undone: false });
    expect(effect(taskId, 'notify')).toMatchObject({ applied: true, calls: 1 });
    const status = await cli(t, ['status', taskId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^ship-all\\s.*child task ${childId} \\(shipment\\) completed$`, 'm'));
    const childStatus = await cli(t, ['status', childId]);
    expect(childStatus.code, childStatus.stderr).toBe(0);
    expect(childStatus.stdout).toMatch(new RegExp(`^parent:\\s+${taskId} \\(step ship-all\\)$`, 'm'));
  });

  it('a child that fails: the step fails, the parent is undone, and what the child did is undone by the child', async () => {
    const { taskId } = await t.client.submit('ordering', { shipping: { failAt: 'send' } });
    const end = await t.client.wait(taskId, { timeoutMs: 40_000 });
    expect(end.status).toBe('compensated');
    const childId = `${taskId}:ship-all:1`;
    expect(end.error).toBe(`step ship-all failed: child task ${childId} (shipment) ended compensated: step send failed permanently: send refused`);
    expect(stepOf(end, 'ship-all')).toMatchObject({ status: 'failed', effect: 'none' });
    expect((await t.client.getTask(childId)).status).toBe('compensated');
    expect(effect(childId, 'pack')).toMatchObject({ applied: true, undone: true });
    expect(effect(childId, 'send')).toBeUndefined();
    expect(effect(taskId, 'reserve')).toMatchObject({ applied: true, undone: true });
    expect(effect(taskId, 'notify')).toBeUndefined();
  });

  it('a child id a client already took: the step fails at once with the reason, and the parent is undone', async () => {
    const parentId = `taken-${Date.now()}`;
    const childId = `${parentId}:ship-all:1`;
    // A client's own task under the id the child would have.
    await t.client.submit('shipment', {}, { taskId: childId });
    expect((await t.client.wait(childId, { timeoutMs: 40_000 })).status).toBe('completed');
    await t.client.submit('ordering', { shipping: {} }, { taskId: parentId });
    const end = await t.client.wait(parentId, { timeoutMs: 40_000 });
    expect(end.status).toBe('compensated');
    expect(end.error).toMatch(new RegExp(`^step ship-all failed: child task ${childId} cannot be created: .*is taken by a task that is not the child of step ship-all of task ${parentId}`));
    expect(stepOf(end, 'ship-all')).toMatchObject({ status: 'failed', effect: 'none' });
    expect(effect(parentId, 'reserve')).toMatchObject({ applied: true, undone: true });
    // The client's task is untouched: no link, its own effects kept.
    const theirs = await t.client.getTask(childId);
    expect(theirs.parent).toBeUndefined();
    expect(effect(childId, 'send')).toMatchObject({ applied: true, undone: false });
  });

  it('a parent step after a completed child fails: the child is undone in its turn, then the steps before it', async () => {
    const { taskId } = await t.client.submit('ordering', { failAt: 'notify', shipping: {} });
    const end = await t.client.wait(taskId, { timeoutMs: 40_000 });
    expect(end.status).toBe('compensated');
    const childId = `${taskId}:ship-all:1`;
    expect(stepOf(end, 'ship-all')).toMatchObject({ status: 'compensated', child: { op: 'undo', ended: 'compensated' } });
    const child = await t.client.getTask(childId);
    expect(child.status).toBe('compensated');
    for (const s of ['pack', 'send']) expect(effect(childId, s)).toMatchObject({ applied: true, undone: true, reversals: 1 });
    expect(effect(taskId, 'reserve')).toMatchObject({ applied: true, undone: true });
    // Reverse order: the child (completed after reserve) was undone before reserve.
    expect(undoneAt(childId, 'pack')).toBeLessThanOrEqual(undoneAt(taskId, 'reserve'));
  });

  it('a parent cancelled while its child runs: the child is cancelled and undone before the parent undoes its own steps', async () => {
    const { taskId } = await t.client.submit('ordering', { shipping: { delayMs: { send: 3_000 } } });
    const childId = `${taskId}:ship-all:1`;
    await waitFor(async () => (await t.client.getTask(childId).catch(() => undefined))?.steps.find((s) => s.name === 'send' && s.status === 'processing'), {
      timeoutMs: 20_000,
      what: 'the child to be sending',
    });
    const status = await cli(t, ['status', taskId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`^ship-all\\s.*waiting\\s.*waiting for child task ${childId} \\(shipment\\)$`, 'm'));
    await t.client.cancel(taskId, 'changed my mind');
    const end = await t.client.wait(taskId, { timeoutMs: 40_000 });
    expect(end.status).toBe('cancelled');
    const child = await t.client.getTask(childId);
    expect(child.status).toBe('cancelled');
    // The child's step in flight drained (it completed), then the child undid both its steps.
    for (const s of ['pack', 'send']) expect(effect(childId, s)).toMatchObject({ applied: true, undone: true });
    expect(stepOf(end, 'ship-all')).toMatchObject({ status: 'abandoned', effect: 'none', child: { op: 'cancel', ended: 'cancelled' } });
    expect(effect(taskId, 'reserve')).toMatchObject({ applied: true, undone: true });
    // The parent's undo began only after its child had ended.
    expect(undoneAt(childId, 'send')).toBeLessThanOrEqual(undoneAt(taskId, 'reserve'));
    expect(effect(taskId, 'notify')).toBeUndefined();
  });
});
