// Decision 0021 §2.3: a bulk operation acts on a task at most once, atomically with the act — cancelTask and
// retryStep with an operation id record it in the task's `bo`; a repeat answers ALREADY_APPLIED and writes
// nothing; a task no longer in the status, or created after the snapshot, is refused with the reason;
// checkpointOp applies each batch once; startOp resumes the same operation and refuses another filter.
import { describe, expect, it } from 'vitest';
import { encode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { OpStore, TaskStore, isAlreadyApplied, keys } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const HELD = { key: 'test:lease:held', token: 'held-token', ms: 600_000 };
const r = usePrivateRedis('triad-bulk-fence-test', (redis) => redis.set(HELD.key, HELD.token));
const T0 = 1_700_000_000_000;
let n = 0;
const ns = (): string => `bulk${process.pid}-${++n}`;
const plan = compilePlan(validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', compensate: { agent: 'x' } }, { name: 'b', agent: 'x', dependsOn: ['a'] }] }));

async function create(store: TaskStore, id: string, now = T0, onFailure: 'error' | 'compensate' = 'compensate'): Promise<void> {
  await store.createTask({ lease: HELD, taskId: id, workflow: 'w', version: 1, input: encode({}), plan, onFailure, client: 'web', now, schedulerId: 's1', tags: { customer: 'c-42' } });
}
const fence = (id: string, expectStatus: 'running' | 'failed', createdBefore = T0 + 1_000) => ({ id, expectStatus, createdBefore });
const cancel = (store: TaskStore, taskId: string, op?: ReturnType<typeof fence>) => store.cancelTask({ lease: HELD, taskId, reason: 'bulk', now: T0 + 10, schedulerId: 's1', ...(op ? { op } : {}) });

describe('the bulk fence in the task', () => {
  it('cancels once per operation; a repeat is ALREADY_APPLIED and changes nothing', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 't1');
    await cancel(store, 't1', fence('op-a', 'running'));
    expect(JSON.parse((await r().hget(store.keys.task('t1'), 'bo')) ?? '[]')).toEqual(['op-a']);
    const before = await r().hgetall(store.keys.task('t1'));
    const again = await cancel(store, 't1', fence('op-a', 'running')).catch((e: unknown) => e);
    expect(isAlreadyApplied(again)).toBe(true);
    expect(await r().hgetall(store.keys.task('t1'))).toEqual(before);
  });

  it('skips a task no longer in the status, or created after the snapshot, with the reason', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 't1');
    await cancel(store, 't1'); // now compensating
    await expect(cancel(store, 't1', fence('op-b', 'running'))).rejects.toThrow(/status is now compensating/);
    await create(store, 'late', T0 + 5_000);
    await expect(cancel(store, 'late', fence('op-b', 'running', T0 + 1_000))).rejects.toThrow(/created after the operation started/);
    expect(await r().hget(store.keys.task('late'), 'bo')).toBeNull();
    expect((await store.getTask('late'))?.status).toBe('running');
  });

  it('retries a failed task once per operation', async () => {
    const store = new TaskStore(r(), ns());
    await create(store, 'f1', T0, 'error');
    await store.applyResult({ lease: HELD, taskId: 'f1', step: 'a', kind: 'run', attempt: 1, now: T0 + 1, schedulerId: 's1', agentId: 'a1', agentType: 'x', outcome: { ok: false, message: 'declined', retryable: false, effect: 'none' } });
    expect((await store.getTask('f1'))?.status).toBe('failed');
    const retry = () => store.retryStep({ lease: HELD, taskId: 'f1', now: T0 + 20, schedulerId: 's1', op: fence('op-r', 'failed') });
    await retry();
    expect((await store.getTask('f1'))?.status).toBe('running');
    expect(isAlreadyApplied(await retry().catch((e: unknown) => e))).toBe(true);
  });

  it('keeps the last 16 operations', async () => {
    const store = new TaskStore(r(), ns());
    for (let i = 0; i < 18; i++) {
      await create(store, `t${i}`);
    }
    // One task, 17 operations that each find it running: only the last 16 ids are kept.
    await r().hset(store.keys.task('t0'), 'bo', JSON.stringify(Array.from({ length: 16 }, (_, i) => `old-${i}`)));
    await cancel(store, 't0', fence('op-new', 'running'));
    const bo = JSON.parse((await r().hget(store.keys.task('t0'), 'bo')) ?? '[]') as string[];
    expect(bo).toHaveLength(16);
    expect(bo[0]).toBe('old-1');
    expect(bo[15]).toBe('op-new');
  });
});

describe('the operation record', () => {
  it('resumes the same operation, refuses another filter, and applies each checkpoint once', async () => {
    const space = ns();
    const ops = new OpStore(r(), space);
    const args = { id: 'op-1', action: 'cancel' as const, filter: '{"status":"running","tags":{"customer":"c-42"}}', asOf: T0, by: 'operator', matched: 100, now: T0 };
    expect((await ops.start(args)).resumed).toBe(false);
    const c = { acted: 50, already: 0, skipped: 1, missing: 0, failed: 0 };
    expect(await ops.checkpoint('op-1', 1, 'cur-1', c, T0 + 1)).toMatchObject({ batch: 1, cursor: 'cur-1', acted: 50, skipped: 1 });
    expect(await ops.checkpoint('op-1', 1, 'cur-1', c, T0 + 2)).toMatchObject({ batch: 1, acted: 50 }); // repeated: no-op
    expect(await ops.checkpoint('op-1', 3, 'cur-3', c, T0 + 2)).toMatchObject({ batch: 1, acted: 50 }); // out of order: no-op
    const again = await ops.start({ ...args, now: T0 + 5 });
    expect(again).toMatchObject({ resumed: true, op: { batch: 1, cursor: 'cur-1', acted: 50, matched: 100, asOf: T0 } });
    await expect(ops.start({ ...args, filter: '{"status":"running","tags":{"customer":"c-41"}}' })).rejects.toThrow(/operation op-1 exists with another action or filter .*use a new --op/);
    expect(await ops.end('op-1', 'done', T0 + 9)).toMatchObject({ state: 'done' });
    expect((await ops.list(10)).map((o) => o.id)).toEqual(['op-1']);
    // The record expires with the retention (7 days by default), renewed by each write.
    expect(await r().pttl(keys(space).op('op-1'))).toBeGreaterThan(6 * 86_400_000);
  });
});
