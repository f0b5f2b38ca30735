// The agent's circuit breaker: after consecutive failures of a remote service the agent stops calling
// it; steps are parked until the breaker half-opens instead of burning their failure budget, and they
// complete once the service is healthy again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskEvent } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { effectCounts, startTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
});

describe('circuit breaker', () => {
  it('parks steps while the breaker is open without counting failures; they complete after the service heals', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0 });
    // Open for 4 s: long enough that the second task surely meets it open, even on a loaded machine.
    await t.startAgents({ TRIAD_BREAKER_THRESHOLD: '2', TRIAD_BREAKER_HALF_OPEN_MS: '4000' });
    // Three failures end a step; the breaker opens after two.
    await t.client.registerWorkflow({
      name: 'orders',
      defaults: { retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 }, ladder: { retries: 3, longBackoffMs: 200, maxFailures: 3 } },
      steps: [
        { name: 'reserve', agent: 'inventory', budgetMs: 2_000 },
        { name: 'charge', agent: 'payment', budgetMs: 2_000, dependsOn: ['reserve'] },
        { name: 'ship', agent: 'shipping', budgetMs: 2_000, dependsOn: ['charge'] },
      ],
    });
    t.services.payment.setFaults({ failRate: 1 });

    const first = await t.client.submit('orders', { orderId: 'cb-1', amount: 1 });
    const parked = await waitFor(
      async () => {
        for await (const e of t.client.watch(first.taskId, { signal: AbortSignal.timeout(300) })) {
          if (e.type === 'step_parked' && e.step === 'charge' && /circuit breaker/.test(e.reason ?? '')) return e;
        }
        return undefined;
      },
      { timeoutMs: 20_000, what: 'the charge step to be parked by the open breaker' },
    ).catch((e: unknown) => e);
    expect(parked).toMatchObject({ type: 'step_parked' });

    // While the breaker is open a new task's charge is parked at once: the service is not called and
    // the step's failure budget is untouched.
    const second = await t.client.submit('orders', { orderId: 'cb-2', amount: 2 });
    const secondEvents: TaskEvent[] = [];
    await waitFor(
      async () => {
        const s = await t.client.getTask(second.taskId);
        return s.steps[1]!.status === 'parked' || undefined;
      },
      { timeoutMs: 10_000, what: 'the second task\'s charge to be parked' },
    );
    const secondState = await t.client.getTask(second.taskId);
    expect(secondState.steps[1]!.failureCount).toBe(0);

    t.services.payment.setFaults({ failRate: 0 });
    const [a, b] = await Promise.all([
      t.client.wait(first.taskId, { timeoutMs: 30_000 }),
      t.client.wait(second.taskId, { timeoutMs: 30_000, onEvent: (e) => secondEvents.push(e) }),
    ]);
    expect(a.status).toBe('completed');
    expect(b.status).toBe('completed');
    // The first task failed twice before the breaker opened — below its budget of three.
    expect(a.steps[1]!.failureCount).toBe(2);
    expect(b.steps[1]!.failureCount).toBe(0);
    expect(secondEvents.some((e) => e.type === 'step_parked' && /circuit breaker/.test(e.reason ?? ''))).toBe(true);
    const counts = effectCounts(t.services.payment);
    expect(counts.get(`${t.namespace}/${first.taskId}/charge`)).toBe(1);
    expect(counts.get(`${t.namespace}/${second.taskId}/charge`)).toBe(1);
  });
});
