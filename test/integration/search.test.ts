// Decision 0021, done-when (1), through a real scheduler and the CLI: of 10,000 tagged tasks the 100 of
// customer c-42 are found by `triad list --tag` and counted by `triad count --tag`, and the Redis work
// (INFO commandstats, which counts the calls scripts make) follows the 100, not the 10,000. A task
// submitted with `triad submit --tag` is found by its tag; a client identity finds only its own tasks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { compilePlan, validateDefinition } from '@triad/core';
import { encode, type TaskSummary } from '@triad/protocol';
import { TaskStore } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

/** A workflow whose agent never runs (no agent process): its tasks stay running. */
const stuck = { name: 'stuck', steps: [{ name: 'hang', agent: 'nobody', budgetMs: 3_600_000 }] };
const plan = compilePlan(validateDefinition(stuck));
const T0 = Date.now() - 3_600_000;
const LEASE = { key: 'test:lease', token: 'test-token', ms: 600_000 };

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: false });
  await t.client.registerWorkflow(stuck);
  await t.redis.set(LEASE.key, LEASE.token);
  // 10,000 tagged tasks created as a scheduler creates them; every 100th is customer c-42's; 50 are client alice's.
  const store = new TaskStore(t.redis, t.namespace);
  for (let i = 0; i < 10_000; i += 500) {
    await Promise.all(
      Array.from({ length: 500 }, (_, j) => {
        const n = i + j;
        const customer = n % 100 === 0 ? 'c-42' : `c-${1000 + (n % 997)}`;
        return store.createTask({ lease: LEASE, taskId: `t-${n}`, workflow: 'stuck', version: 1, input: encode({ n }), plan, onFailure: 'error', client: n % 200 === 0 ? 'alice' : 'web', now: T0 + n, schedulerId: 'seed', tags: { customer, region: n % 2 === 0 ? 'eu' : 'us' } });
      }),
    );
  }
}, 180_000);

async function counts(): Promise<Record<string, number>> {
  const info = String(await t.redis.info('commandstats'));
  const out: Record<string, number> = {};
  // Calls that ran: a fresh CLI's first EVALSHA of a script the server has not loaded fails with NOSCRIPT
  // (counted in calls and failed_calls); the store then loads it once and the others retry.
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+).*?failed_calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]) - Number(m[3]);
  return out;
}

/** What `fn` made Redis do, by command (everything on the server meanwhile: the scheduler's own work too). */
async function redisWork(fn: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = await counts();
  await fn();
  const after = await counts();
  const d: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0 && k !== 'info') d[k] = v - (before[k] ?? 0);
  return d;
}

const INDEX_COMMANDS = ['zrevrangebylex', 'zlexcount', 'zscore', 'zcount', 'zrevrangebyscore', 'zrangebyscore', 'zrange', 'zrevrange', 'hmget', 'hgetall'];
/** Script runs: EVALSHA, or the one EVAL that loads a script the server did not have. */
const scriptCalls = (d: Record<string, number>): number => (d['evalsha'] ?? 0) + (d['eval'] ?? 0);
const indexWork = (d: Record<string, number>): number => INDEX_COMMANDS.reduce((s, c) => s + (d[c] ?? 0), 0);

describe('search by tags (decision 0021)', () => {
  it('triad list and triad count find the 100 tasks of c-42 among 10,000 with Redis work proportional to 100', async () => {
    let list = { stdout: '', stderr: '', code: -1 };
    const listWork = await redisWork(async () => (list = await cli(t, ['list', '--tag', 'customer=c-42', '--limit', '1000', '--json'])));
    expect(list.code, list.stderr).toBe(0);
    const page = JSON.parse(list.stdout) as { tasks: TaskSummary[]; next?: string };
    expect(page.next).toBeUndefined();
    expect(page.tasks.map((x) => x.taskId).sort()).toEqual(Array.from({ length: 100 }, (_, k) => `t-${k * 100}`).sort());
    expect(page.tasks.every((x) => x.tags?.['customer'] === 'c-42' && x.status === 'running')).toBe(true);
    // One script call per bucket in one round, its range read, and one HMGET per task found.
    expect(scriptCalls(listWork)).toBe(64);
    expect(indexWork(listWork)).toBeLessThanOrEqual(2 * 64 + 3 * 100);
    expect(listWork['hmget'] ?? 0).toBeLessThanOrEqual(100 + 2);

    let count = { stdout: '', stderr: '', code: -1 };
    const countWork = await redisWork(async () => (count = await cli(t, ['count', '--tag', 'customer=c-42'])));
    expect(count.code, count.stderr).toBe(0);
    expect(count.stdout.trim()).toBe('100');
    expect(scriptCalls(countWork)).toBe(64);
    expect(countWork['zlexcount']).toBe(64);
    expect(indexWork(countWork)).toBeLessThanOrEqual(64 + 2);

    // With a status, a workflow and a time window: the same 100 (every c-42 task is running, of stuck, in the window).
    const narrowed = await cli(t, ['list', '--tag', 'customer=c-42', '--status', 'running', '--workflow', 'stuck', '--since', '2h', '--limit', '30']);
    expect(narrowed.code, narrowed.stderr).toBe(0);
    expect(narrowed.stdout.split('\n')[0]).toMatch(/^TASK\s+WORKFLOW\s+STATUS\s+CREATED\s+UPDATED\s+TAGS/);
    expect(narrowed.stdout).toMatch(/^t-9900\s+stuck@1\s+running\s.*customer=c-42 region=eu$/m);
    const more = /^more: triad list (.*) --cursor (\S+)$/m.exec(narrowed.stdout);
    expect(more, narrowed.stdout).not.toBeNull();
    const failed = await cli(t, ['count', '--tag', 'customer=c-42', '--status', 'failed']);
    expect(failed.stdout.trim()).toBe('0');
  });

  it('pages with the cursor to the end, each task once; a cursor of another query is refused', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const r = await cli(t, ['list', '--tag', 'customer=c-42', '--limit', '30', '--json', ...(cursor ? ['--cursor', cursor] : [])]);
      expect(r.code, r.stderr).toBe(0);
      const page = JSON.parse(r.stdout) as { tasks: TaskSummary[]; next?: string };
      seen.push(...page.tasks.map((x) => x.taskId));
      cursor = page.next;
      if (!cursor) break;
    }
    expect(seen).toHaveLength(100);
    expect(new Set(seen).size).toBe(100);
    const page = await t.client.queryTasks({ tags: { customer: 'c-42' }, limit: 10 });
    const other = await cli(t, ['list', '--tag', 'customer=c-43', '--cursor', page.next ?? '']);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/this cursor belongs to another query/);
  });

  it('triad submit --tag tags a task the scheduler indexes; bad tags are refused before connecting', async () => {
    const sub = await cli(t, ['submit', 'stuck', '--id', 'tagged-1', '--tag', 'customer=c-77', '--tag', 'region=eu']);
    expect(sub.code, sub.stderr).toBe(0);
    await waitFor(async () => (await t.client.countTasks({ tags: { customer: 'c-77' } })).count === 1, { timeoutMs: 20_000, what: 'the tagged task to be recorded' });
    expect((await t.client.getTask('tagged-1')).tags).toEqual({ customer: 'c-77', region: 'eu' });
    const bad = await cli(t, ['submit', 'stuck', '--tag', 'customer c-42']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--tag must be key=value, e\.g\. --tag customer=c-42/);
    const twice = await cli(t, ['submit', 'stuck', '--tag', 'a=1', '--tag', 'a=2']);
    expect(twice.stderr).toMatch(/--tag a given twice/);
    const reserved = await cli(t, ['submit', 'stuck', '--tag', 'triad.x=1']);
    expect(reserved.stderr).toMatch(/key "triad\.x" is reserved for Triad/);
    // The SDK's submission is refused by the same schema before it is sent.
    await expect(t.client.submit('stuck', {}, { tags: { customer: 'x'.repeat(140) } })).rejects.toThrow(/tags\.customer: the value is 140 bytes; at most 128/);
  });

  it('a client identity finds only its own tasks by tag', async () => {
    const alice = await TriadClient.connect({ ...clientOptionsFromEnv(t.env), clientId: 'alice', reads: 'own' });
    try {
      const mine = await alice.queryTasks({ tags: { customer: 'c-42' }, limit: 1000 });
      expect(mine.tasks.length).toBe(50);
      expect(mine.tasks.every((x) => x.client === 'alice')).toBe(true);
      expect((await alice.countTasks({ tags: { customer: 'c-42' } })).count).toBe(50);
      await expect(alice.queryTasks({ tags: { customer: 'c-42' }, client: 'web' })).rejects.toThrow(/client "web" is not this subject's client/);
    } finally {
      await alice.close();
    }
  });

  // Last in this file: it stops the scheduler.
  it('triad status of a submission no scheduler has picked up says so, and for how long (decision 0021 §3.4)', async () => {
    await Promise.all(t.schedulers.map((s) => s.stop()));
    await t.client.submit('stuck', {}, { taskId: 'waiting-1' });
    const r = await cli(t, ['status', 'waiting-1']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^no task waiting-1 yet: not yet picked up by any scheduler — 1 submission waits, the oldest for \S+ \(since \d{4}-\d\d-\d\dT[^)]+\); no scheduler pulling$/m);
  });
});
