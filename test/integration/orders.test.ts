// The foundation's end-to-end path: submissions over NATS run through real scheduler and agent
// processes, steps in order, every state change in Redis, each remote effect applied once per key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { WHOLE_ORDER_LINE, ordersWorkflow } from '@triad/example-orders';
import { cli, effectCounts, startTriad, type TestTriad } from '../support/triad.js';
import { isTerminal, type TaskEvent, type TaskState } from '@triad/protocol';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let triad: TestTriad;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  triad = await startTriad(td, { nats, redis }, { schedulers: 2, agentProcesses: 2 });
});

function expectInOrder(state: TaskState, order: string[]): void {
  const steps = order.map((n) => state.steps.find((s) => s.name === n));
  for (const s of steps) {
    expect(s?.status, `step ${s?.name} of ${state.taskId}`).toBe('processed');
    expect(s?.attempt).toBeGreaterThanOrEqual(1);
  }
  for (let i = 1; i < steps.length; i++) {
    // A step starts only after its dependency was processed (same scheduler clock for both stamps).
    expect(steps[i]!.startedAt!, `${steps[i]!.name} started before ${steps[i - 1]!.name} finished`).toBeGreaterThanOrEqual(steps[i - 1]!.finishedAt!);
  }
}

describe('orders workflow end to end', () => {
  it('completes one task: parallel steps fan out and in, outputs passed to the steps that need them', async () => {
    const events: TaskEvent[] = [];
    const state = await triad.client.run('orders', { orderId: 'o1', amount: 42 }, { timeoutMs: 30_000, onEvent: (e) => events.push(e) });
    expect(state.status).toBe('completed');
    expectInOrder(state, ['reserve', 'charge', 'ship']);
    expectInOrder(state, ['fraud', 'charge', 'ship']);
    expect(state.steps.find((s) => s.name === 'charge')?.output).toMatchObject({ amount: 42 });
    // reserve and fraud start together (no dependencies), charge once both are done: fan-out, fan-in.
    expect(events.slice(0, 3).map((e) => `${e.type}:${e.step ?? ''}`)).toEqual(['received:', 'step_started:reserve', 'step_started:fraud']);
    const at = (type: string, step: string): number => events.findIndex((e) => e.type === type && e.step === step);
    expect(at('step_started', 'charge')).toBeGreaterThan(Math.max(at('step_done', 'reserve'), at('step_done', 'fraud')));
    expect(at('step_started', 'ship')).toBeGreaterThan(at('step_done', 'charge'));
    expect(events.at(-1)?.type).toBe('completed');
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: events.length }, (_, i) => i + 1));
    // The shipping agent got reserve's and charge's outputs (declared in needs) and used them. The order
    // lists no items, so the inventory reserved it as a whole: ship fanned out over that one line.
    const ship = triad.services.shipping.effects().find((e) => e.idempotencyKey === `${triad.namespace}/${state.taskId}/ship/0`);
    const output = (name: string): unknown => state.steps.find((s) => s.name === name)!.output;
    expect(ship?.payload).toMatchObject({ reservation: output('reserve'), charge: output('charge'), item: WHOLE_ORDER_LINE });
    expect(output('ship')).toEqual([(ship?.result as Record<string, unknown>)]);
  });

  it('sends every event to a private reply subject named by the submitter', async () => {
    const reply = triad.client.replySubject();
    const { taskId } = await triad.client.submit('orders', { orderId: 'o-reply', amount: 7 }, { replyTo: reply.subject });
    const seen: TaskEvent[] = [];
    for await (const e of reply.events) {
      seen.push(e);
      if (e.type === 'completed') break;
    }
    reply.close();
    expect(seen.every((e) => e.taskId === taskId)).toBe(true);
    expect(seen.map((e) => e.type)).toContain('step_done');
    expect(seen.at(-1)?.type).toBe('completed');
  });

  it('runs 200 tasks submitted at once on 2 schedulers and 2 agent processes: all complete, each effect once per key', async () => {
    const ids = await Promise.all(Array.from({ length: 200 }, (_, i) => triad.client.submit('orders', { orderId: `bulk-${i}`, amount: i }).then((r) => r.taskId)));
    const states = await Promise.all(ids.map((id) => triad.client.wait(id, { timeoutMs: 60_000 })));
    expect(states.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}:${s.status}`)).toEqual([]);
    for (const s of states) expectInOrder(s, ['reserve', 'charge', 'ship']);
    for (const service of Object.values(triad.services)) {
      const counts = effectCounts(service);
      for (const id of ids) {
        // ship fans out over the reservation's lines: an order without items ships as one line, element 0.
        const step = { inventory: 'reserve', fraud: 'fraud', payment: 'charge', shipping: 'ship/0' }[service.name as 'inventory'];
        expect(counts.get(`${triad.namespace}/${id}/${step}`), `${service.name} effect of ${id}`).toBe(1);
      }
    }
    // Both schedulers and both agent processes took part (the work is shared, not pinned to one).
    const lockedBy = new Set(states.map((s) => s.lockedBy));
    expect(lockedBy.size, 'tasks driven by both schedulers').toBe(2);
    // (A fan-out step is run by its elements, each with its own agent: the step itself names none.)
    const agentIds = new Set(states.flatMap((s) => s.steps.filter((st) => st.agent && st.items === undefined).map((st) => st.lockedBy)));
    expect(agentIds.size, 'steps run by both agent processes').toBe(2);
  });

  it('submitting the same task id twice runs the task once', async () => {
    const taskId = `dup-${Date.now()}`;
    const first = await triad.client.submit('orders', { orderId: 'dup', amount: 1 }, { taskId });
    const second = await triad.client.submit('orders', { orderId: 'dup', amount: 1 }, { taskId });
    expect(first.duplicate).toBe(false);
    expect(second.duplicate).toBe(true);
    const state = await triad.client.wait(taskId, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    expect(effectCounts(triad.services.payment).get(`${triad.namespace}/${taskId}/charge`)).toBe(1);
  });

  it('lists tasks and reads one task state', async () => {
    const list = await triad.client.listTasks({ status: 'completed', limit: 5 });
    expect(list.length).toBe(5);
    expect(list.every((t) => t.status === 'completed' && t.workflow === 'orders')).toBe(true);
    const one = await triad.client.getTask(list[0]!.taskId);
    expect(one.steps.map((s) => s.name)).toEqual(['reserve', 'fraud', 'approval', 'charge', 'ship']);
  });

  it('wait() returns the final state of a task whose events were lost (events go without PubAck: a NATS failover can drop one)', async () => {
    const { taskId } = await triad.client.submit('orders', { orderId: 'lost-events', amount: 5 });
    await waitFor(async () => (isTerminal((await triad.client.getTask(taskId)).status) ? true : undefined), { timeoutMs: 30_000, what: 'the task to end' });
    // Its whole history gone, the end included: the watch alone would wait for an event that never comes.
    const { bus } = triad.client;
    await bus.jsm.streams.purge(bus.names.streams.events, { filter: bus.names.subjects.event(triad.client.clientId, taskId) });
    const state = await triad.client.wait(taskId, { timeoutMs: 20_000 });
    expect(state).toMatchObject({ taskId, status: 'completed' });
  });
});

describe("the example's approval of large orders (decision 0019: a conditional wait for the signal approved)", () => {
  const approvalOf = (s: TaskState) => s.steps.find((x) => x.name === 'approval')!;

  it('an order above 1000 waits for approved: signalled, it is charged and shipped; the approval is the signal data', async () => {
    const { taskId } = await triad.client.submit('orders', { orderId: 'big-1', amount: 1500 });
    await waitFor(async () => (approvalOf(await triad.client.getTask(taskId)).status === 'waiting' ? true : undefined), { timeoutMs: 30_000, what: 'the approval to wait' });
    const waiting = await triad.client.getTask(taskId);
    // Nothing is charged while it waits.
    expect(triad.services.payment.effects().some((e) => e.idempotencyKey === `${triad.namespace}/${taskId}/charge`)).toBe(false);
    expect(waiting.steps.find((x) => x.name === 'charge')!.status).toBe('pending');
    await triad.client.signal(taskId, 'approved', { approvedBy: 'ana' });
    const done = await triad.client.wait(taskId, { timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    expect(approvalOf(done)).toMatchObject({ status: 'processed', output: { approvedBy: 'ana' } });
    expectInOrder(done, ['charge', 'ship']);
    expect(done.steps.find((x) => x.name === 'charge')!.startedAt!).toBeGreaterThanOrEqual(approvalOf(done).finishedAt!);
  });

  it('an order of 1000 or less skips the approval, with the reason', async () => {
    const done = await triad.client.run('orders', { orderId: 'small-1', amount: 1000 }, { timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    expect(approvalOf(done)).toMatchObject({ status: 'skipped', reason: 'amount 1000 is not > 1000' });
  });

  it('without the signal the approval times out and the order is undone: the reservation released, nothing charged', async () => {
    // The example's definition with a short approval window (two minutes in the example).
    const base = ordersWorkflow.toJSON();
    await triad.client.registerWorkflow({ ...base, name: 'orders-unapproved', steps: base.steps.map((s) => (s.waitFor ? { ...s, waitFor: { ...s.waitFor, timeoutMs: 2_000 } } : s)) });
    const state = await triad.client.run('orders-unapproved', { orderId: 'big-2', amount: 5000 }, { timeoutMs: 30_000 });
    expect(state.status).toBe('compensated');
    expect(Object.fromEntries(state.steps.map((s) => [s.name, s.status]))).toMatchObject({ reserve: 'compensated', approval: 'error', charge: 'pending', ship: 'pending' });
    const reservation = triad.services.inventory.effects().find((e) => e.idempotencyKey === `${triad.namespace}/${state.taskId}/reserve`);
    expect(reservation).toMatchObject({ applied: true, undone: true, reversals: 1 });
    expect(triad.services.payment.effects().some((e) => e.idempotencyKey.startsWith(`${triad.namespace}/${state.taskId}/`))).toBe(false);
  });
});

describe('the example undoes an order it cannot finish', () => {
  it('a failure injected in shipping refunds the charge, then releases the reservation (reverse order)', async () => {
    // The example's own definition, with a short failure ladder so the test does not wait minutes.
    const fastOrders = { ...ordersWorkflow.toJSON(), name: 'orders-fast', defaults: { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 1, longBackoffMs: 100, maxFailures: 2 } } };
    await triad.client.registerWorkflow(fastOrders);
    triad.services.shipping.setFaults({ failRate: 1 });
    try {
      const events: TaskEvent[] = [];
      const state = await triad.client.run('orders-fast', { orderId: 'undo-me', amount: 30 }, { timeoutMs: 30_000, onEvent: (e) => events.push(e) });
      expect(state.status).toBe('compensated');
      expect(Object.fromEntries(state.steps.map((s) => [s.name, s.status]))).toEqual({ reserve: 'compensated', fraud: 'processed', approval: 'skipped', charge: 'compensated', ship: 'error' });
      expect(events.filter((e) => e.type === 'compensation_done').map((e) => e.step)).toEqual(['charge', 'reserve']);
      const refund = triad.services.payment.effects().find((e) => e.idempotencyKey === `${triad.namespace}/${state.taskId}/charge`)!;
      const release = triad.services.inventory.effects().find((e) => e.idempotencyKey === `${triad.namespace}/${state.taskId}/reserve`)!;
      expect(refund.undone && release.undone).toBe(true);
      expect(Date.parse(refund.undoneAt!)).toBeLessThanOrEqual(Date.parse(release.undoneAt!));
      expect(refund.undoResult).toMatchObject({ amount: 30 });
    } finally {
      triad.services.shipping.setFaults({ failRate: 0 });
    }
  });
});

describe('the triad CLI against a running Triad', () => {
  const run = (args: string[]): ReturnType<typeof cli> => cli(triad, args);

  it('submit --wait --json prints one completed task whose steps ran in order, and exits 0', async () => {
    const r = await run(['submit', 'orders', '--input', '{"orderId":"o1","amount":42}', '--wait', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as TaskState;
    expect(out.status).toBe('completed');
    expect(out.steps.map((s) => `${s.name}:${s.status}`)).toEqual(['reserve:processed', 'fraud:processed', 'approval:skipped', 'charge:processed', 'ship:processed']);
    expectInOrder(out, ['reserve', 'charge', 'ship']);
  });

  it('status, list and workflows read what the scheduler recorded; a bad input is refused with exit 2', async () => {
    const submitted = await run(['submit', 'orders', '--input', '{"orderId":"o2","amount":1}', '--wait', '--json']);
    const { taskId } = JSON.parse(submitted.stdout) as TaskState;
    const status = await run(['status', taskId]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/reserve/);
    expect(status.stdout).toMatch(/completed/);
    // `--json` is { tasks, next? } since decision 0021 (the list pages with a cursor).
    const list = JSON.parse((await run(['list', '--json', '--status', 'completed'])).stdout) as { tasks: { taskId: string }[] };
    expect(list.tasks.map((t) => t.taskId)).toContain(taskId);
    const wfs = await run(['workflows', '--json']);
    expect(JSON.parse(wfs.stdout)).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'orders' })]));
    const bad = await run(['submit', 'orders', '--input', '{bad']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/triad: .*JSON/);
  });
});
