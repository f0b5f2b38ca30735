// Decision 0021 §1: the search index of tagged tasks on a real redis-server — its members after each
// transition that changes a status, their removal by retention, and task.query/task.count against the
// brute-force answer (paging to the end: every match once, none missing), plus the cost proof: Redis work
// follows the matches, not the tasks (INFO commandstats, as plain-cost.test.ts counts).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { encode, type TaskStatus } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { TaskStore, type TaskFilter } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-search-test', (redis) => redis.set(HELD.key, HELD.token));
const T0 = 1_700_000_000_000;
let nsCounter = 0;
const ns = (): string => `search${process.pid}-${++nsCounter}`;

const plan = compilePlan(
  validateDefinition({
    name: 'orders',
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
      { name: 'charge', agent: 'payment', dependsOn: ['reserve'] },
    ],
  }),
);
const input = encode({ orderId: 'o1' });

async function create(store: TaskStore, taskId: string, o: { tags?: Record<string, string>; now?: number; workflow?: string; client?: string } = {}): Promise<void> {
  const c = await store.createTask({ lease: HELD, taskId, workflow: o.workflow ?? 'orders', version: 1, input, plan, onFailure: 'compensate', client: o.client ?? 'web', now: o.now ?? T0, schedulerId: 's1', ...(o.tags ? { tags: o.tags } : {}) });
  if (!c.created) throw new Error(`task ${taskId} not created`);
}

function result(taskId: string, step: 'reserve' | 'charge', now: number, ok: boolean) {
  const agentType = step === 'reserve' ? 'inventory' : 'payment';
  return { lease: HELD, taskId, step, kind: 'run' as const, attempt: 1, now, schedulerId: 's1', agentId: 'a1', agentType, outcome: ok ? { ok: true as const, output: encode({}) } : { ok: false as const, message: 'declined', retryable: false, effect: 'none' as const } };
}

/** The search index members of a task, readable: `kind value` (the time and id parts checked to be its own). */
async function membersOf(store: TaskStore, taskId: string): Promise<string[]> {
  const all = await r().zrange(store.keys.forTask(taskId).search, 0, -1);
  return all
    .map((m) => m.split('\x1f'))
    .filter((p) => p[3] === taskId)
    .map((p) => `${p[0]} ${p[1]}`)
    .sort();
}

describe('the search index', () => {
  it('indexes a tagged task by each tag, its status, workflow and client, and moves its status member with it', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'o1', { tags: { customer: 'c-42', region: 'eu' } });
    expect(await membersOf(store, 'o1')).toEqual(['c web', 's running', 't customer=c-42', 't region=eu', 'w orders']);
    expect((await store.getTask('o1'))?.tags).toEqual({ customer: 'c-42', region: 'eu' });
    await store.applyResult(result('o1', 'reserve', T0 + 1, true));
    await store.applyResult(result('o1', 'charge', T0 + 2, false)); // charge fails for good: the undo begins
    expect(await membersOf(store, 'o1')).toContain('s compensating');
    expect(await membersOf(store, 'o1')).not.toContain('s running');
    await store.applyResult({ ...result('o1', 'reserve', T0 + 3, true), kind: 'compensate' });
    expect((await store.getTask('o1'))?.status).toBe('compensated');
    expect((await membersOf(store, 'o1')).filter((m) => m.startsWith('s '))).toEqual(['s compensated']);
  });

  it('follows a cancel, a failure and a retry', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'c1', { tags: { customer: 'c-1' } });
    await store.cancelTask({ lease: HELD, taskId: 'c1', reason: 'test', now: T0 + 1, schedulerId: 's1' });
    expect((await membersOf(store, 'c1')).filter((m) => m.startsWith('s '))).toEqual([`s ${(await store.getTask('c1'))?.status}`]);
    // A workflow that fails without undo: failed, then retried → running again.
    const failPlan = compilePlan(validateDefinition({ name: 'f', onFailure: 'error', steps: [{ name: 'reserve', agent: 'inventory' }] }));
    await store.createTask({ lease: HELD, taskId: 'f1', workflow: 'f', version: 1, input, plan: failPlan, onFailure: 'error', client: 'web', now: T0, schedulerId: 's1', tags: { customer: 'c-1' } });
    await store.applyResult(result('f1', 'reserve', T0 + 1, false));
    expect((await membersOf(store, 'f1')).filter((m) => m.startsWith('s '))).toEqual(['s failed']);
    await store.retryStep({ lease: HELD, taskId: 'f1', now: T0 + 2, schedulerId: 's1' });
    expect((await membersOf(store, 'f1')).filter((m) => m.startsWith('s '))).toEqual(['s running']);
    expect(await store.countTasks({ tags: { customer: 'c-1' }, status: 'running' })).toMatchObject({ count: 1 });
  });

  it('indexes nothing for an untagged task, and retention removes a tagged task\'s members', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'plain');
    expect(await r().zcard(store.keys.forTask('plain').search)).toBe(0);
    await create(store, 'tagged', { tags: { customer: 'c-9' } });
    for (const id of ['plain', 'tagged']) {
      await store.applyResult(result(id, 'reserve', T0 + 1, true));
      await store.applyResult(result(id, 'charge', T0 + 2, true));
    }
    await store.compactFinished(T0 + 10, 100, 1);
    expect((await store.getTask('tagged'))?.tags).toEqual({ customer: 'c-9' }); // compaction keeps the tags and the members
    expect(await membersOf(store, 'tagged')).toContain('s completed');
    expect(await store.purgeFinished(T0 + 10, 100, 1)).toBe(2);
    for (const b of store.keys.buckets) expect(await r().zcard(b.search)).toBe(0);
  });

  it('refuses a cursor of another query', async () => {
    const store = new TaskStore(r(), ns());
    for (let i = 0; i < 5; i++) await create(store, `t${i}`, { tags: { customer: 'c-1' }, now: T0 + i });
    const page = await store.queryTasks({ tags: { customer: 'c-1' } }, 2);
    expect(page.tasks.map((t) => t.taskId)).toEqual(['t4', 't3']);
    expect(page.next).toBeDefined();
    await expect(store.queryTasks({ tags: { customer: 'c-2' } }, 2, page.next)).rejects.toThrow(/this cursor belongs to another query/);
    const rest = await store.queryTasks({ tags: { customer: 'c-1' } }, 10, page.next);
    expect(rest.tasks.map((t) => t.taskId)).toEqual(['t2', 't1', 't0']);
    expect(rest.next).toBeUndefined();
  });
});

const CUSTOMERS = ['c-1', 'c-2', 'c-3'];
const STATUSES: TaskStatus[] = ['running', 'compensating', 'compensated', 'completed'];

describe('task.query and task.count against the brute-force answer', () => {
  it('paging to the end returns each match once, and counts are exact', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ customer: fc.constantFrom(...CUSTOMERS, undefined), region: fc.constantFrom('eu', 'us', undefined), at: fc.integer({ min: 0, max: 20 }), fate: fc.constantFrom<'run' | 'done' | 'undo'>('run', 'done', 'undo'), client: fc.constantFrom('web', 'app') }), { minLength: 1, maxLength: 40 }),
        fc.record({ customer: fc.constantFrom(...CUSTOMERS, undefined), region: fc.constantFrom('eu', 'us', undefined), status: fc.constantFrom(...STATUSES, undefined), client: fc.constantFrom('web', 'app', undefined), since: fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined }), until: fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined }) }),
        fc.integer({ min: 1, max: 7 }),
        async (tasks, q, limit) => {
          const store = new TaskStore(r(), ns());
          const truth: { id: string; at: number; tags: Record<string, string>; status: TaskStatus; client: string }[] = [];
          for (const [i, t] of tasks.entries()) {
            const id = `task-${i}`;
            const tags: Record<string, string> = {};
            if (t.customer) tags['customer'] = t.customer;
            if (t.region) tags['region'] = t.region;
            const at = T0 + t.at;
            await create(store, id, { now: at, client: t.client, ...(Object.keys(tags).length > 0 ? { tags } : {}) });
            if (t.fate !== 'run') await store.applyResult(result(id, 'reserve', at + 1, true));
            if (t.fate !== 'run') await store.applyResult(result(id, 'charge', at + 2, t.fate === 'done'));
            truth.push({ id, at, tags, status: (await store.getTask(id))?.status as TaskStatus, client: t.client });
          }
          const filter: TaskFilter = {};
          const tags: Record<string, string> = {};
          if (q.customer) tags['customer'] = q.customer;
          if (q.region) tags['region'] = q.region;
          if (Object.keys(tags).length > 0) filter.tags = tags;
          if (q.status) filter.status = q.status;
          if (q.client) filter.client = q.client;
          if (q.since !== undefined) filter.since = T0 + q.since;
          if (q.until !== undefined) filter.until = T0 + q.until;
          const expected = truth
            .filter((t) => Object.entries(tags).every(([k, v]) => t.tags[k] === v))
            .filter((t) => !filter.status || t.status === filter.status)
            .filter((t) => !filter.client || t.client === filter.client)
            .filter((t) => filter.since === undefined || t.at >= filter.since)
            .filter((t) => filter.until === undefined || t.at <= filter.until)
            .sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1))
            .map((t) => t.id);
          const got: string[] = [];
          let cursor: string | undefined;
          for (let pages = 0; pages < 100; pages++) {
            const page = await store.queryTasks(filter, limit, cursor);
            expect(page.tasks.length).toBeLessThanOrEqual(limit);
            got.push(...page.tasks.map((t) => t.taskId));
            if (!page.next) break;
            cursor = page.next;
          }
          expect(got).toEqual(expected);
          expect(await store.countTasks(filter)).toMatchObject({ count: expected.length, exact: true });
        },
      ),
      { numRuns: 25, seed: 2021 },
    );
  });
});

async function commandCounts(): Promise<Record<string, number>> {
  const info = await r().info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

/** The commands `fn` made, by type (the counting commands themselves left out). */
async function cost(fn: () => Promise<unknown>): Promise<Record<string, number>> {
  await r().config('RESETSTAT');
  await fn();
  const c = await commandCounts();
  delete c['config|resetstat'];
  delete c['info'];
  return c;
}

async function seed(store: TaskStore, from: number, n: number, tagsOf: (i: number) => Record<string, string>): Promise<void> {
  for (let i = from; i < from + n; i += 250) {
    await Promise.all(Array.from({ length: Math.min(250, from + n - i) }, (_, j) => create(store, `t-${i + j}`, { now: T0 + i + j, tags: tagsOf(i + j) })));
  }
}

describe('the cost of a query follows its matches', () => {
  it('finds the 100 tasks of c-42 among 10,000 with work proportional to 100, and the same work among 20,000', async () => {
    const store = new TaskStore(r(), ns());
    // 10,000 tagged tasks; every 100th belongs to c-42.
    const tagsOf = (i: number): Record<string, string> => ({ customer: i % 100 === 0 ? 'c-42' : `c-${1000 + (i % 997)}`, region: i % 2 === 0 ? 'eu' : 'us' });
    await seed(store, 0, 10_000, tagsOf);
    const measure = async () => {
      let page: Awaited<ReturnType<TaskStore['queryTasks']>> | undefined;
      const list = await cost(async () => (page = await store.queryTasks({ tags: { customer: 'c-42' } }, 1000)));
      let counted: Awaited<ReturnType<TaskStore['countTasks']>> | undefined;
      const count = await cost(async () => (counted = await store.countTasks({ tags: { customer: 'c-42' } })));
      let both: Awaited<ReturnType<TaskStore['queryTasks']>> | undefined;
      const two = await cost(async () => (both = await store.queryTasks({ tags: { customer: 'c-42', region: 'eu' }, status: 'running' }, 1000)));
      return { list, count, two, page, counted, both };
    };
    const m1 = await measure();
    expect(m1.page?.tasks).toHaveLength(100);
    expect(m1.page?.next).toBeUndefined();
    expect(new Set(m1.page?.tasks.map((t) => t.tags?.['customer']))).toEqual(new Set(['c-42']));
    expect(m1.counted).toEqual({ count: 100, exact: true, scanned: 0 });
    expect(m1.both?.tasks).toHaveLength(100); // i % 100 === 0 is even: every c-42 task is in eu
    // The list: one script call per bucket (one round), one range read per bucket, one HMGET per task of the page.
    expect(m1.list['evalsha']).toBe(64 * (m1.page?.rounds ?? 0));
    expect(m1.page?.rounds).toBe(1);
    expect(m1.list['zrevrangebylex'] ?? 0).toBeLessThanOrEqual(64);
    expect(m1.list['hmget']).toBe(100);
    expect(m1.page?.scanned).toBe(100);
    // The count: one ZLEXCOUNT per bucket, nothing else.
    expect(m1.count).toEqual({ evalsha: 64, zlexcount: 64 });
    // Two tags and a status: the smallest filter drives (c-42's 100), each candidate checked by ZSCORE.
    expect(m1.both?.scanned).toBe(100);
    expect(m1.two['zscore']).toBe(200);
    expect(m1.two['zlexcount']).toBe(64 * 3);
    // 10,000 more tasks, none of c-42: the same queries make exactly the same commands.
    await seed(store, 10_000, 10_000, (i) => ({ customer: `c-${2000 + (i % 997)}`, region: 'eu' }));
    const m2 = await measure();
    expect(m2.list).toEqual(m1.list);
    expect(m2.count).toEqual(m1.count);
    expect(m2.two).toEqual(m1.two);
    expect(m2.page?.tasks.map((t) => t.taskId)).toEqual(m1.page?.tasks.map((t) => t.taskId));
  }, 120_000);
});
