// Decision 0021 §3.7 as built (settled item 18): task.stuck from the indexes every task already has — the
// deadline index for (B) overdue, the tasks index by createdAt for (A) past its bound — on a real
// redis-server: which tasks are listed and why, the filters, the per-bucket scan cap, and that the reads
// follow the candidates (tasks older than the smallest bound, deadlines passed), not all the tasks.
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { TaskStore, findStuck, type StuckQuery } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-stuck-test', (redis) => redis.set(HELD.key, HELD.token));
let nsCounter = 0;
const ns = (): string => `stuck${process.pid}-${++nsCounter}`;
const NOW = 1_700_000_000_000;
const BOUND = 60_000;
const plan = compilePlan(validateDefinition({ name: 'orders', steps: [{ name: 'reserve', agent: 'inventory', budgetMs: 10_000 }] }));

async function create(store: TaskStore, taskId: string, createdAt: number, o: { workflow?: string; tags?: Record<string, string>; client?: string } = {}): Promise<void> {
  const c = await store.createTask({ lease: HELD, taskId, workflow: o.workflow ?? 'orders', version: 1, input: encode({}), plan, onFailure: 'error', client: o.client ?? 'web', now: createdAt, schedulerId: 's1', ...(o.tags ? { tags: o.tags } : {}) });
  if (!c.created) throw new Error(`task ${taskId} not created`);
}

const query = (o: Partial<StuckQuery> = {}): StuckQuery => ({ now: NOW, limit: 50, scan: 1_000, graceMs: 7_000, minBoundMs: BOUND, boundOf: () => Promise.resolve(BOUND), ...o });

async function calls(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of String(await r().info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

describe('task.stuck from the existing indexes', () => {
  it('lists a task past its bound and one whose complete-by passed beyond the grace, not a healthy or a finished one', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'old', NOW - 3_600_000); // created an hour ago, complete-by long passed: both
    await create(store, 'late', NOW - 20_000); // complete-by NOW − 10 s: overdue (past the 7 s grace), within its bound
    await create(store, 'fresh', NOW - 15_000); // complete-by NOW − 5 s: within the grace
    await create(store, 'young', NOW - 1_000); // in flight
    await create(store, 'done', NOW - 3_600_000);
    await store.applyResult({ lease: HELD, taskId: 'done', step: 'reserve', kind: 'run', attempt: 1, now: NOW - 3_599_000, schedulerId: 's1', agentId: 'a1', agentType: 'inventory', outcome: { ok: true, output: encode({}) } });
    const res = await findStuck(r(), store.keys, query());
    expect(res.complete).toBe(true);
    expect(res.tasks.map((t) => [t.summary.taskId, t.why])).toEqual([
      ['old', 'both'],
      ['late', 'overdue'],
    ]);
    const old = res.tasks[0]!;
    expect(old.boundAt).toBe(NOW - 3_600_000 + BOUND);
    expect(old.lateMs).toBe(3_600_000 - 10_000);
    expect(old.overdueSince).toBe(NOW - 3_600_000 + 10_000);
    expect(old.summary).toMatchObject({ workflow: 'orders', version: 1, status: 'running', client: 'web' });
    // A bound that cannot be computed leaves (A) out: the old task is then only overdue.
    expect((await findStuck(r(), store.keys, query({ boundOf: () => Promise.resolve(undefined) }))).tasks.find((t) => t.summary.taskId === 'old')?.why).toBe('overdue');
  });

  it('filters by workflow, tags and client, and says when a bucket held more than the scan', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'a', NOW - 3_600_000, { tags: { customer: 'c-42' } });
    await create(store, 'b', NOW - 3_600_000, { tags: { customer: 'c-7' }, client: 'alice' });
    await create(store, 'c', NOW - 3_600_000, { workflow: 'other' });
    const ids = async (o: Partial<StuckQuery>): Promise<string[]> => (await findStuck(r(), store.keys, query(o))).tasks.map((t) => t.summary.taskId).sort();
    expect(await ids({})).toEqual(['a', 'b', 'c']);
    expect(await ids({ workflow: 'orders' })).toEqual(['a', 'b']);
    expect(await ids({ tags: { customer: 'c-42' } })).toEqual(['a']);
    expect(await ids({ client: 'alice' })).toEqual(['b']);
    expect(await ids({ limit: 1 })).toHaveLength(1);
    // 40 more old tasks: some bucket holds two or more; a scan of 1 per bucket cannot see them all.
    for (let i = 0; i < 40; i++) await create(store, `x${i}`, NOW - 3_600_000 + i);
    const capped = await findStuck(r(), store.keys, query({ scan: 1 }));
    expect(capped.complete).toBe(false);
    expect((await findStuck(r(), store.keys, query())).complete).toBe(true);
  });

  it('reads follow the candidates: 1,000 young in-flight tasks add no HMGET, and no index is written', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'old', NOW - 3_600_000);
    const measure = async (): Promise<Record<string, number>> => {
      const before = await calls();
      await findStuck(r(), store.keys, query());
      const after = await calls();
      const d: Record<string, number> = {};
      for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0 && k !== 'info') d[k] = v - (before[k] ?? 0);
      return d;
    };
    const small = await measure();
    for (let i = 0; i < 1_000; i++) await create(store, `y${i}`, NOW - 1_000);
    const large = await measure();
    expect(large).toEqual(small);
    expect(small).toEqual({ zrangebyscore: 128, hmget: 1 });
  });
});
