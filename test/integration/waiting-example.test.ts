// Issue #23's "done when", on real processes with the example's services and agents: the workflow of
// decision 0019's example (docs/decisions/0019-example.workflow.json), registered from JSON with the CLI —
// reserve ∥ a 3 s cool-off (a durable sleep), an approval that waits for the signal `approved` only above
// 1000 (a conditional waitFor, 10 s), then ship each item of the order (forEach, 2 at a time). Signalled,
// it completes with exactly one shipping call per element; without the signal it is undone after its
// timeout (the reservation released, nothing shipped); with a small amount the wait is skipped, with its
// reason; and a sleep survives a kill -9 of the scheduler and both supervisors, never ending before its time.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskState } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { checkLedgers } from '../support/ledger.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const EXAMPLE = fileURLToPath(new URL('../../docs/decisions/0019-example.workflow.json', import.meta.url));
const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const supervisor = { intervalMs: 200, leaseMs: 1_500 };
const items = [
  { sku: 'lamp', qty: 1 },
  { sku: 'desk', qty: 2 },
];

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, supervisor });
  await t.startSupervisor(supervisor);
  const reg = await cli(t, ['workflows', 'register', EXAMPLE]);
  expect(reg.code, reg.stderr).toBe(0);
});

const stepOf = (s: TaskState, name: string) => s.steps.find((x) => x.name === name)!;
const shipKeys = (taskId: string): string[] => t.services.shipping.effects().filter((e) => e.idempotencyKey.startsWith(`${t.namespace}/${taskId}/ship/`) && !e.idempotencyKey.endsWith('/compensate')).map((e) => e.idempotencyKey);
const definition = async () => t.client.getWorkflow('approved-orders');

async function waitingForApproval(taskId: string): Promise<void> {
  await waitFor(async () => (stepOf(await t.client.getTask(taskId), 'approval').status === 'waiting' ? true : undefined), { timeoutMs: 30_000, what: 'the approval to wait' });
}

describe("issue #23's done-when: decision 0019's example workflow from JSON", () => {
  it('signalled, it completes: one shipping call per element, the outputs in order', async () => {
    const { taskId } = await t.client.submit('approved-orders', { orderId: 'w-1', amount: 1500, items });
    await waitingForApproval(taskId);
    const sent = await cli(t, ['signal', taskId, 'approved', '--data', '{"approvedBy":"ana"}']);
    expect(sent.code, sent.stderr).toBe(0);
    const done = await t.client.wait(taskId, { timeoutMs: 60_000 });
    expect(done.status).toBe('completed');
    expect(stepOf(done, 'approval')).toMatchObject({ status: 'processed', output: { approvedBy: 'ana' } });
    // One call per element, each applied once under its own key.
    expect(shipKeys(taskId).sort()).toEqual([`${t.namespace}/${taskId}/ship/0`, `${t.namespace}/${taskId}/ship/1`]);
    for (const key of shipKeys(taskId)) expect(t.services.shipping.effects().find((e) => e.idempotencyKey === key)).toMatchObject({ applied: true, calls: 1 });
    const output = stepOf(done, 'ship').output as { trackingNumber: string }[];
    expect(output).toHaveLength(2);
    // Element i's output is the one the service gave element i.
    output.forEach((o, i) => {
      const effect = t.services.shipping.effects().find((e) => e.idempotencyKey === `${t.namespace}/${taskId}/ship/${i}`);
      expect(effect?.result).toEqual(o);
      // ...and shipped item i of the order.
      expect(effect?.payload).toMatchObject({ orderId: 'w-1', item: items[i] });
    });
    expect(checkLedgers(t.namespace, t.services, await definition(), [done])).toEqual({ orphans: [], wrongUndos: [], duplicates: [] });
  });

  it('without the signal it is undone after its timeout: the reservation released, nothing shipped', async () => {
    const { taskId } = await t.client.submit('approved-orders', { orderId: 'w-2', amount: 1500, items });
    const end = await t.client.wait(taskId, { timeoutMs: 60_000 });
    expect(end.status).toBe('compensated');
    expect(stepOf(end, 'approval')).toMatchObject({ status: 'error', error: 'timed out after 10000 ms waiting for signal approved' });
    expect(stepOf(end, 'reserve').status).toBe('compensated');
    expect(t.services.inventory.effects().find((e) => e.idempotencyKey === `${t.namespace}/${taskId}/reserve`)).toMatchObject({ applied: true, undone: true, reversals: 1 });
    expect(shipKeys(taskId)).toEqual([]);
  });

  it('with a small amount the wait is skipped, with its reason, and the order completes', async () => {
    const done = await t.client.run('approved-orders', { orderId: 'w-3', amount: 10, items }, { timeoutMs: 60_000 });
    expect(done.status).toBe('completed');
    expect(stepOf(done, 'approval')).toMatchObject({ status: 'skipped', reason: 'amount 10 is not > 1000' });
    expect(shipKeys(done.taskId)).toHaveLength(2);
  });

  it('a sleep ends, never before its time, after the scheduler and both supervisors are killed -9 during it', async () => {
    const { taskId } = await t.client.submit('approved-orders', { orderId: 'w-4', amount: 10, items });
    const asleep = await waitFor(async () => {
      const s = await t.client.getTask(taskId);
      return stepOf(s, 'cool-off').status === 'sleeping' ? s : undefined;
    }, { timeoutMs: 20_000, what: 'the cool-off to sleep' });
    const sleep = stepOf(asleep, 'cool-off');
    expect(sleep.until).toBe(sleep.startedAt! + 3_000);
    await Promise.all([...t.schedulers, ...t.supervisors].map((p) => p.kill('SIGKILL')));
    t.schedulers.length = 0;
    t.supervisors.length = 0;
    await t.startScheduler();
    await t.startSupervisor(supervisor);
    await t.startSupervisor(supervisor);
    const done = await t.client.wait(taskId, { timeoutMs: 60_000 });
    expect(done.status).toBe('completed');
    expect(stepOf(done, 'cool-off').finishedAt!).toBeGreaterThanOrEqual(sleep.startedAt! + 3_000);
    expect(shipKeys(taskId)).toHaveLength(2);
  });
});
