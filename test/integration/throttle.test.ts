// Decision 0020 increment 1: a service that throttles (429 with Retry-After above its rate) slows the
// steps that call it down without failing any: each throttled charge is parked until the Retry-After as
// a refusal, not a failure. Counts only — never timings.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskEvent } from '@triad/protocol';
import { startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { effectCounts, startTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
});

describe('a throttling service', () => {
  it('40 orders through rateLimit 10 on payment all complete, no charge counts a failure, and payment saw the 429s', async () => {
    const t = await startTriad(td, { nats, redis });
    // Warm up first, so what is measured is the throttle, not the agents' first connections.
    expect((await t.client.wait((await t.client.submit('orders', { orderId: 'warm', amount: 1 })).taskId, { timeoutMs: 30_000 })).status).toBe('completed');
    t.services.payment.resetStats();
    t.services.payment.setFaults({ rateLimit: 10 });

    const events = new Map<string, TaskEvent[]>();
    const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => t.client.submit('orders', { orderId: `th-${i}`, amount: 10 + i }).then((r) => r.taskId)));
    const ended = await Promise.all(
      ids.map((id) => {
        const seen: TaskEvent[] = [];
        events.set(id, seen);
        return t.client.wait(id, { timeoutMs: 120_000, onEvent: (e) => seen.push(e) });
      }),
    );
    const stats = t.services.payment.stats();
    const statuses = ended.map((s) => s.status);
    expect(statuses.filter((s) => s !== 'completed'), `statuses: ${statuses.join(', ')}`).toEqual([]);
    for (const s of ended) {
      const charge = s.steps.find((x) => x.name === 'charge');
      expect(charge?.failureCount, `task ${s.taskId}'s charge`).toBe(0);
    }
    // 40 calls at once against 10 a second: the service refused some, and the steps it refused were parked as throttled.
    expect(stats.throttled).toBeGreaterThan(0);
    expect(stats.calls.length).toBe(40 + stats.throttled);
    const parkedByThrottle = [...events.values()].flat().filter((e) => e.type === 'step_parked' && e.step === 'charge' && /^throttled by the service/.test(e.reason ?? '')).length;
    expect(parkedByThrottle).toBeGreaterThan(0);
    // Every charge applied once, none twice.
    const counts = effectCounts(t.services.payment);
    for (const id of ids) expect(counts.get(`${t.namespace}/${id}/charge`), id).toBe(1);
  });
});
