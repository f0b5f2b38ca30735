// NATS and Redis restarted mid-run, their data kept (JetStream store, Redis AOF): every actor reconnects
// and every accepted task still reaches a terminal state — completed here, with effects once per key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/nats-core';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { effectCounts, startTriad, type TestTriad, fastOrders } from '../support/triad.js';
import { taskStates, waitForInFlight } from '../support/waits.js';

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

/** Starts listening to `nc`'s status now; resolves true once it reports a disconnect (false if it closes first). */
async function disconnected(nc: NatsConnection): Promise<boolean> {
  for await (const s of nc.status()) if (s.type === 'disconnect') return true;
  return false;
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
    // Charges take 200 ms, so tasks are caught in flight (well within the budget).
    t.services.payment.setFaults({ latencyMs: 200 });
    const ids = await submitMany(t, 40, 'nats');
    await waitForInFlight(t, ids, 10);
    let noticed = false;
    void disconnected(t.client.bus.nc).then((d) => (noticed = d), () => undefined);
    await nats.kill();
    await waitFor(() => noticed, { timeoutMs: 10_000, what: "the client's NATS connection to notice the outage" });
    // The restart must find tasks mid-run (Redis is up: their state can be read meanwhile).
    expect((await taskStates(t, ids)).filter((s) => s.status === 'running').length, 'tasks running while NATS is down').toBeGreaterThan(0);
    await nats.restart();
    const states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 90_000 })));
    expect(states.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}:${s.status}`)).toEqual([]);
    expectAllOnce(t, ids);
  });

  it('Redis restarted mid-run (AOF kept): every task completes', async () => {
    const t = await startTriad(td, { nats, redis }, { registerOrders: false });
    await t.client.registerWorkflow(orders);
    t.services.payment.setFaults({ latencyMs: 200 });
    const ids = await submitMany(t, 40, 'redis');
    await waitForInFlight(t, ids, 10);
    await redis.kill();
    await waitFor(() => t.redis.status !== 'ready', { timeoutMs: 10_000, intervalMs: 10, what: "the test's Redis connection to notice the outage", lastSeen: () => `status ${t.redis.status}` });
    await redis.restart();
    const states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 90_000 })));
    expect(states.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}:${s.status}`)).toEqual([]);
    expectAllOnce(t, ids);
  });
});
