// Client-scoped reads on a real redis-server (decision 0017): a client reads its own tasks only — another
// client's task reads exactly as a missing one, and its list holds only its own, filtered within the
// bounded scan of the namespace's recent tasks.
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { TaskStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:client-reads:lease', token: 'client-reads-token', ms: 600_000 };
const r = usePrivateRedis('triad-client-reads-test', (redis) => redis.set(HELD.key, HELD.token));

let nsCounter = 0;
function store(): TaskStore {
  return new TaskStore(r(), `cr${process.pid}-${++nsCounter}`);
}

const T0 = 1_700_000_000_000;
const plan = compilePlan(validateDefinition({ name: 'one', steps: [{ name: 's', agent: 'x', budgetMs: 1_000 }] }));

/** Creates `taskId` as `client` submitted it, `i` ms after T0 (newer tasks list first). */
async function create(s: TaskStore, taskId: string, client: string, i: number): Promise<void> {
  const out = await s.createTask({ lease: HELD, taskId, workflow: 'one', version: 1, input: encode({ secret: taskId }), plan, onFailure: 'error', client, now: T0 + i, schedulerId: 'sched-1' });
  expect(out.created).toBe(true);
}

describe('getTaskOf', () => {
  it("returns a client's own task, and nothing for another client's task or a missing one", async () => {
    const s = store();
    await create(s, 'a-1', 'alice', 1);
    expect(await s.getTaskOf('a-1', 'alice')).toMatchObject({ taskId: 'a-1', client: 'alice', input: { secret: 'a-1' } });
    expect(await s.getTaskOf('a-1', 'bob')).toBeUndefined();
    expect(await s.getTaskOf('missing', 'alice')).toBeUndefined();
    // The operator's read is unchanged.
    expect(await s.getTask('a-1')).toMatchObject({ taskId: 'a-1', client: 'alice' });
  });

  it('a record without a client (written before decision 0010) belongs to "default"', async () => {
    const s = store();
    await create(s, 'old-1', 'default', 1);
    await r().hdel(s.keys.task('old-1'), 'client');
    expect(await s.getTaskOf('old-1', 'default')).toMatchObject({ taskId: 'old-1' });
    expect(await s.getTaskOf('old-1', 'alice')).toBeUndefined();
  });
});

describe('listTasks with a client', () => {
  it("lists only the client's tasks, newest first, with status and limit applied", async () => {
    const s = store();
    const owners = ['alice', 'bob', 'alice', 'carol', 'alice', 'bob'];
    for (const [i, owner] of owners.entries()) await create(s, `t-${i}`, owner, i);
    const ids = async (q: Parameters<TaskStore['listTasks']>[0]): Promise<string[]> => (await s.listTasks(q)).map((t) => t.taskId);
    expect(await ids({ client: 'alice', limit: 10 })).toEqual(['t-4', 't-2', 't-0']);
    expect(await ids({ client: 'bob', limit: 10 })).toEqual(['t-5', 't-1']);
    expect(await ids({ client: 'alice', limit: 2 })).toEqual(['t-4', 't-2']);
    expect(await ids({ client: 'alice', status: 'running', limit: 10 })).toEqual(['t-4', 't-2', 't-0']);
    expect(await ids({ client: 'alice', status: 'completed', limit: 10 })).toEqual([]);
    expect(await ids({ client: 'nobody', limit: 10 })).toEqual([]);
    // Unfiltered, every client's.
    expect(await ids({ limit: 10 })).toHaveLength(owners.length);
  });

  it("reads at most scanLimit recent tasks: a client's older tasks beyond it are not listed", async () => {
    const s = store();
    await create(s, 'mine-old', 'alice', 0);
    for (let i = 1; i <= 5; i++) await create(s, `other-${i}`, 'bob', i);
    expect((await s.listTasks({ client: 'alice', limit: 1, scanLimit: 5 })).map((t) => t.taskId)).toEqual([]);
    expect((await s.listTasks({ client: 'alice', limit: 1, scanLimit: 6 })).map((t) => t.taskId)).toEqual(['mine-old']);
    // The default bound, max(20 × limit, 2000), reaches it.
    expect((await s.listTasks({ client: 'alice', limit: 1 })).map((t) => t.taskId)).toEqual(['mine-old']);
  });
});
