// NATS and Redis restarted mid-run, their data kept (JetStream store, Redis AOF): every actor reconnects
// and every accepted task still reaches a terminal state — completed here, with effects once per key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { effectCounts, startTriad, type TestTriad, fastOrders } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td, aof: true })]);
});

const orders = fastOrders({ budgetMs: 2_000, retry: { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 200 }, ladder: { retries: 20, longBackoffMs: 500, maxFailures: 25 } });

async function submitMany(t: TestTriad, n: number, prefix: string): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => t.client.submit('orders', { orderId: `${prefix}-${i}`, amount: i }).then((r) => r.taskId)));
}

function expectAllOnce(t: TestTriad, ids: string[]): void {
  for (const [service, step] of [['inventory', 'reserve'], ['payment', 'charge'], ['shipping', 'ship']] as const) {
    const counts = effectCounts(t.services[service]);
    for (const id of ids) expect(counts.get(`${t.namespace}/${id}/${step}`), `${service} effect of ${id}`).toBe(1);
  }
}

describe('server restarts', () => {
  it('NATS restarted mid-run (JetStream data kept): every task completes', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false });
    await t.client.registerWorkflow(orders);
    t.services.payment.setFaults({ latencyMs: 20 });
    const ids = await submitMany(t, 40, 'nats');
    await sleep(100);
    await nats.kill();
    await sleep(500);
    await nats.restart();
    const states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 90_000 })));
    expect(states.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}:${s.status}`)).toEqual([]);
    expectAllOnce(t, ids);
  });

  it('Redis restarted mid-run (AOF kept): every task completes', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false });
    await t.client.registerWorkflow(orders);
    t.services.payment.setFaults({ latencyMs: 20 });
    const ids = await submitMany(t, 40, 'redis');
    await sleep(100);
    await redis.kill();
    await sleep(500);
    await redis.restart();
    const states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 90_000 })));
    expect(states.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}:${s.status}`)).toEqual([]);
    expectAllOnce(t, ids);
  });
});
