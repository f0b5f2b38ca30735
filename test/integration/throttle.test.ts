// Decision 0020 §5 (increment 5): a service that throttles (429 with Retry-After above its rate) slows the
// steps that call it down without failing any: with no limit set, the first throttle gives payment a
// pause-only limiter, paused until the Retry-After, and each throttled charge goes back in line as a
// refusal, not a failure; once nothing is left in it the leader supervisor retires the limiter. Counts
// only — never timings.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskEvent } from '@triad/protocol';
import { startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, effectCounts, startTriad } from '../support/triad.js';

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
    // 40 calls at once against 10 a second: the service refused some, and the steps it refused went back in line, paused.
    expect(stats.throttled).toBeGreaterThan(0);
    expect(stats.calls.length).toBe(40 + stats.throttled);
    const requeued = [...events.values()].flat().filter((e) => e.type === 'step_queued' && e.step === 'charge' && /^throttled by payment: paused until/.test(e.reason ?? '')).length;
    expect(requeued).toBeGreaterThan(0);
    // Every charge applied once, none twice.
    const counts = effectCounts(t.services.payment);
    for (const id of ids) expect(counts.get(`${t.namespace}/${id}/charge`), id).toBe(1);
    // The pause-only limiter is retired once its pause ended and nothing is left in it.
    const until = Date.now() + 30_000;
    let listed = '';
    for (;;) {
      const r = await cli(t, ['limits', 'list', '--json']);
      listed = r.stdout;
      if (r.code === 0 && (JSON.parse(r.stdout) as unknown[]).length === 0) break;
      if (Date.now() > until) throw new Error(`payment's pause-only limiter was not retired: ${listed}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  });
});
