// Decision 0019 §10 ("what the bench must show"), as a deterministic test: the Redis commands a plain task's
// transitions make, by type, counted by the server itself (INFO commandstats counts the calls scripts make).
// The new step kinds must add nothing to a task that uses none of them: a condition is read only for a
// step that has one. If a change to the transitions moves these counts, it says so here, and the bench's
// throughput figures must be checked before the counts are updated.
// 2026-11-26: applyResult reads the task's status, plan, updatedAt, lockedBy and lockEpoch in one HMGET
// and every step record once (exists 4 → 1, hget 23 → 5, hmget 7 → 10; docs/performance.md, "A plain
// task's cost").
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { LimitCache, LimitStore, TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-plain-cost-test', (redis) => redis.set(HELD.key, HELD.token));
const T0 = 1_700_000_000_000;

/** The bench's workflow shape: three agent steps in a row, the last two needing the previous output. */
const plain = compilePlan(
  validateDefinition({
    name: 'plain',
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
      { name: 'charge', agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'] },
      { name: 'ship', agent: 'shipping', dependsOn: ['charge'], needs: ['charge'] },
    ],
  }),
);

async function commandCounts(): Promise<Record<string, number>> {
  const info = await r().info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

describe('the cost of a plain task', () => {
  it('its transitions make exactly these Redis calls', async () => {
    const store = new TaskStore(r(), 'cost');
    // A first task loads the scripts (EVAL after NOSCRIPT): the count is of a task on a warm server.
    await runTask(store, 'warm-up');
    await r().config('RESETSTAT');
    await runTask(store, 'p1');
    const counts = await commandCounts();
    delete counts['config|resetstat'];
    delete counts['info'];
    expect(counts).toEqual({ evalsha: 4, exists: 1, get: 4, hget: 5, hincrby: 11, hmget: 10, hset: 12, set: 4, zadd: 6, zrem: 4 });
  });
});

describe('the cost of a plain task while another agent type is limited (decision 0020 §10)', () => {
  it('makes exactly the same Redis calls: the limited table is an argument, never a read', async () => {
    const limits = new LimitStore(r(), 'cost-limited');
    await limits.set('fraud-check', { concurrency: 1 }, T0);
    const cache = new LimitCache(limits, { refreshMs: 3_600_000 });
    await cache.refresh(T0);
    expect(cache.tableAt(T0)).toBe('{"fraud-check":{}}');
    const store = new TaskStore(r(), 'cost-limited', { limits: cache });
    await runTask(store, 'warm-up');
    await r().config('RESETSTAT');
    await runTask(store, 'p1');
    const counts = await commandCounts();
    delete counts['config|resetstat'];
    delete counts['info'];
    expect(counts).toEqual({ evalsha: 4, exists: 1, get: 4, hget: 5, hincrby: 11, hmget: 10, hset: 12, set: 4, zadd: 6, zrem: 4 });
  });
});

async function runTask(store: TaskStore, taskId: string): Promise<void> {
    const created = await store.createTask({ lease: HELD, taskId, workflow: 'plain', version: 1, input: encode({ orderId: 'o1', amount: 42 }), plan: plain, onFailure: 'compensate', client: 'c1', now: T0, schedulerId: 's1' });
    if (!created.created) throw new Error('expected a new task');
    let now = T0;
    for (const [step, agent] of [['reserve', 'inventory'], ['charge', 'payment'], ['ship', 'shipping']] as const) {
      now += 10;
      const res = await store.applyResult({ lease: HELD, taskId, step, kind: 'run', attempt: 1, now, schedulerId: 's1', agentId: 'a1', agentType: agent, outcome: { ok: true, output: encode({ done: step }) } });
      if (!res.applied) throw new Error(`result of ${step} not applied`);
    }
}
