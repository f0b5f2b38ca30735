// Agent-side faults on real processes: an agent killed mid-step, an agent paused past completeBy, a
// remote service that always hangs. The supervisor notices (complete-by passed), retries by the ladder,
// and every remote effect is applied once per idempotency key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StepResultSchema, encode, type StepResult, type TaskEvent } from '@triad/protocol';
import { keys } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, effectCounts, startTriad, fastOrders } from '../support/triad.js';
import { waitForCall, waitForSweeps } from '../support/waits.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
});

const orders = fastOrders({ budgetMs: 800, retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 }, ladder: { retries: 3, longBackoffMs: 300, maxFailures: 5 } });

describe('agent faults', () => {
  it('an agent killed (SIGKILL) mid-step: the step is retried with attempt 2 and the task completes, effect once', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false });
    // A wide ladder: the new agent process may take seconds to start on a busy machine, and every
    // attempt sent meanwhile times out; the step must still be retried when it is up, not given up.
    await t.client.registerWorkflow({ ...orders, defaults: { ...orders.defaults, ladder: { retries: 20, longBackoffMs: 300, maxFailures: 25 } } });
    // The call takes 1.5 s, longer than the step's budget: the agent is surely mid-step when killed.
    t.services.payment.setFaults({ latencyMs: 1_500 });
    const { taskId } = await t.client.submit('orders', { orderId: 'kill-1', amount: 10 });
    // The agent's claim records it as the step's holder: from there it is mid-call.
    await waitForCall(t, taskId, 'charge');
    await t.agents[0]!.kill('SIGKILL');
    t.services.payment.setFaults({ latencyMs: 0 });
    await t.startAgents();
    const state = await t.client.wait(taskId, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    const charge = state.steps.find((s) => s.name === 'charge')!;
    expect(charge.attempt).toBeGreaterThanOrEqual(2);
    expect(charge.failureCount).toBeGreaterThanOrEqual(1);
    expect(effectCounts(t.services.payment).get(`${t.namespace}/${taskId}/charge`)).toBe(1);
  });

  it('an agent paused (SIGSTOP) past completeBy, then resumed: the retried attempt wins, a late result is rejected, effect once', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 2 });
    // A wide ladder: a paused agent's outstanding pull requests can swallow a retry or two for their
    // 5 s lifetime; the supervisor keeps retrying until a live agent takes one.
    await t.client.registerWorkflow({ ...orders, defaults: { ...orders.defaults, ladder: { retries: 20, longBackoffMs: 300, maxFailures: 25 } } });
    t.services.payment.setFaults({ latencyMs: 1_500 });
    const { taskId } = await t.client.submit('orders', { orderId: 'pause-1', amount: 11 });
    await waitForCall(t, taskId, 'charge');
    // Pause both agent processes (whichever holds the step), so neither can answer in time.
    for (const a of t.agents) a.pause();
    const paused = await waitFor(async () => {
      const s = (await t.client.getTask(taskId)).steps.find((x) => x.name === 'charge')!;
      return s.attempt >= 2 ? s : undefined;
    }, { timeoutMs: 15_000, what: 'the supervisor to retry the charge while the agents are paused' });
    expect(paused.attempt).toBeGreaterThanOrEqual(2);
    t.services.payment.setFaults({ latencyMs: 0 });
    await t.startAgents();
    for (const a of t.agents.slice(0, 2)) a.resume();
    const state = await t.client.wait(taskId, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    expect(effectCounts(t.services.payment).get(`${t.namespace}/${taskId}/charge`)).toBe(1);
    // Whatever the resumed agents send for attempt 1 now is late: inject exactly such a late result and
    // check it is rejected, counted, and changes nothing.
    const before = await t.client.getTask(taskId);
    const late: StepResult = { taskId, step: 'charge', kind: 'run', attempt: 1, agentId: 'paused-agent', finishedAt: Date.now(), tries: 1, ok: true, output: { chargeId: 'forged', amount: 999 } };
    expect(StepResultSchema.safeParse(late).success).toBe(true);
    await t.client.bus.js.publish(t.client.bus.names.subjects.result('payment'), encode(late), { msgID: `late-${taskId}` });
    const staleKey = keys(t.namespace).task(taskId);
    await waitFor(async () => Number((await t.redis.hget(staleKey, 'staleResults')) ?? 0) >= 1 || undefined, { timeoutMs: 10_000, what: 'the late result to be counted as stale' });
    const after = await t.client.getTask(taskId);
    expect(after.steps.find((s) => s.name === 'charge')!.output).toEqual(before.steps.find((s) => s.name === 'charge')!.output);
    expect(after.status).toBe('completed');
  });

  it('a remote service that always hangs: the step climbs the whole ladder to error, the task fails, exactly one alert', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false });
    await t.client.registerWorkflow({ ...orders, defaults: { ...orders.defaults, ladder: { retries: 1, longBackoffMs: 200, maxFailures: 3 } } });
    t.services.payment.setFaults({ hangRate: 1 });
    const events: TaskEvent[] = [];
    const state = await t.client.run('orders', { orderId: 'hang-1', amount: 12 }, { timeoutMs: 30_000, onEvent: (e) => events.push(e) });
    expect(state.status).toBe('failed');
    const charge = state.steps.find((s) => s.name === 'charge')!;
    expect(charge.status).toBe('error');
    expect(charge.failureCount).toBe(3);
    const types = events.filter((e) => e.step === 'charge').map((e) => e.type);
    // failure 1 → retry; failure 2 → park; park ends → retry; failure 3 → error
    expect(types).toEqual(['step_started', 'step_retried', 'step_parked', 'step_retried', 'step_error']);
    expect(state.steps.find((s) => s.name === 'ship')!.status).toBe('pending');
    // Exactly one alert, in the alerts stream and the open-alerts record.
    const bus = t.client.bus;
    await waitFor(async () => (await bus.jsm.streams.info(bus.names.streams.alerts)).state.messages >= 1 || undefined, { timeoutMs: 10_000, what: 'the alert' });
    // More sweeps pass: still one.
    await waitForSweeps(t, 3);
    expect((await bus.jsm.streams.info(bus.names.streams.alerts)).state.messages).toBe(1);
    const open = await t.redis.hgetall(keys(t.namespace).forTask(state.taskId).alerts);
    expect(Object.keys(open)).toHaveLength(1);
    expect(JSON.parse(Object.values(open)[0]!)).toMatchObject({ taskId: state.taskId, step: 'charge', failureCount: 3, kind: 'step_error' });

    // The operator sees the alert, heals the service and retries the step from the CLI: the task completes.
    const alerts = await cli(t, ['alerts', '--json']);
    expect(alerts.code, alerts.stderr).toBe(0);
    expect(JSON.parse(alerts.stdout)).toEqual([expect.objectContaining({ taskId: state.taskId, step: 'charge' })]);
    t.services.payment.setFaults({ hangRate: 0 });
    const retried = await cli(t, ['retry', state.taskId, '--json']);
    expect(retried.code, retried.stderr).toBe(0);
    expect(JSON.parse(retried.stdout)).toMatchObject({ taskId: state.taskId, step: 'charge', attempt: charge.attempt + 1 });
    const after = await t.client.wait(state.taskId, { timeoutMs: 30_000 });
    expect(after.status).toBe('completed');
    expect(after.steps.map((s) => s.status)).toEqual(['processed', 'processed', 'processed']);
    expect(effectCounts(t.services.payment).get(`${t.namespace}/${state.taskId}/charge`)).toBe(1);
    expect(await t.client.alerts()).toEqual([]);
    // Retrying a completed task is refused with the reason.
    const again = await cli(t, ['retry', state.taskId]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/the task is completed/);
  });

  it('retry with a corrected input: a step that failed permanently on bad input succeeds with the new one', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, supervisor: false });
    await t.client.registerWorkflow(orders);
    const failed = await t.client.run('orders', { orderId: 'bad-amount', amount: -1 }, { timeoutMs: 30_000 });
    expect(failed.status).toBe('failed');
    expect(failed.steps[0]!.status).toBe('failed');
    const r = await t.client.retry(failed.taskId, { input: { orderId: 'bad-amount', amount: 15 } });
    expect(r).toMatchObject({ step: 'reserve', attempt: 2 });
    const done = await t.client.wait(failed.taskId, { timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    expect(done.input).toEqual({ orderId: 'bad-amount', amount: 15 });
    expect(done.steps[1]!.output).toMatchObject({ amount: 15 });
  });
});
