// Proves retention's compaction stage on a real redis-server (compactFinished.lua, decision 0007): only
// tasks that can never be retried are compacted, after their delay, into a listpack record under the
// memory budget that getTask reads back as the same state less what the rules drop; fenced by the
// supervisor epoch; purge removes compacted tasks and every index entry.
import { describe, expect, it } from 'vitest';
import { encode, isTriadError, type TaskState, type WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { TaskStore, WorkflowStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';
import { indexMembers } from './buckets.js';

const r = usePrivateRedis('triad-compaction-test');

// ---------------------------------------------------------------------------------------------
// Fixtures: tasks driven to their end through the real transitions.

let nsCounter = 0;
function ns(): string {
  return `c${process.pid}-${++nsCounter}`;
}

const T0 = 1_700_000_000_000;
const EPOCH = 5;
/** What a finished 3-step task may cost: its hash plus its share of the tasks and finished indexes. */
const BUDGET_BYTES = 2_048;
/** A lease the transitions take and keep taking (same token): only these tests use it. */
const HELD = { key: 'test:compaction:lease', token: 'compaction-token', ms: 600_000 };
const input = encode({ orderId: 'o-1', amount: 42 });

const undo = { agent: 'refunds', budgetMs: 500 };
const linear: WorkflowDefinitionInput = {
  name: 'linear',
  steps: [
    { name: 'reserve', agent: 'inventory', budgetMs: 1_000 },
    { name: 'charge', agent: 'payment', budgetMs: 2_000, dependsOn: ['reserve'], needs: ['reserve'] },
    { name: 'ship', agent: 'shipping', budgetMs: 3_000, dependsOn: ['charge'] },
  ],
};
const saga: WorkflowDefinitionInput = {
  name: 'saga',
  onFailure: 'compensate',
  steps: [
    { name: 'reserve', agent: 'inventory', budgetMs: 1_000, compensate: undo },
    { name: 'charge', agent: 'payment', budgetMs: 2_000, dependsOn: ['reserve'], compensate: undo },
    { name: 'ship', agent: 'shipping', budgetMs: 3_000, dependsOn: ['charge'] },
  ],
};

interface Ctx {
  store: TaskStore;
  plans: Record<string, PlanStep[]>;
}

/** A fresh namespace with both workflows registered (the pinned definitions compaction relies on) and a leader epoch. */
async function setup(): Promise<Ctx> {
  const namespace = ns();
  const store = new TaskStore(r(), namespace);
  const workflows = new WorkflowStore(r(), namespace);
  const plans: Record<string, PlanStep[]> = {};
  for (const def of [linear, saga]) {
    const wf = validateDefinition(def);
    const { version } = await workflows.register(wf, T0);
    expect(version).toBe(1);
    plans[wf.name] = compilePlan(wf);
  }
  await store.fenceBuckets(EPOCH);
  return { store, plans };
}

async function create(c: Ctx, taskId: string, workflow: 'linear' | 'saga', now: number): Promise<void> {
  const plan = c.plans[workflow] ?? [];
  const out = await c.store.createTask({
    lease: HELD,
    taskId,
    workflow,
    version: 1,
    input,
    replyTo: '_INBOX.compaction-test.0123456789abcdef0123456789',
    plan,
    onFailure: workflow === 'saga' ? 'compensate' : 'error',
    client: 'client-1',
    now,
    schedulerId: 'sched-1',
  });
  if (!out.created) throw new Error(`task ${taskId} already existed`);
}

/** A result; a failure here is a refusal by the service (nothing applied: effect 'none'), as a 4xx is. */
function result(taskId: string, step: string, attempt: number, now: number, outcome: { ok: true; output: unknown } | { ok: false; message: string }, kind: 'run' | 'compensate' = 'run') {
  return {
    lease: HELD,
    taskId,
    step,
    kind,
    attempt,
    now,
    schedulerId: 'sched-1',
    agentId: 'agent-1',
    // Every compensation here is the refunds agent's; runs are the step's own agent's.
    agentType: kind === 'compensate' ? 'refunds' : ({ reserve: 'inventory', charge: 'payment', ship: 'shipping' } as Record<string, string>)[step] ?? step,
    outcome: outcome.ok ? { ok: true as const, output: encode(outcome.output) } : { ok: false as const, message: outcome.message, retryable: false, effect: 'none' as const },
  };
}

/** Runs every step of a `linear` task to success; the task completes at `now + 30`. */
async function completed(c: Ctx, taskId: string, now: number, output: (step: string) => unknown = (s) => ({ done: s, ref: `${s}-0001` })): Promise<void> {
  await create(c, taskId, 'linear', now);
  for (const [i, step] of ['reserve', 'charge', 'ship'].entries()) {
    const applied = await c.store.applyResult(result(taskId, step, 1, now + 10 * (i + 1), { ok: true, output: output(step) }));
    if (!applied.applied) throw new Error(`result for ${step} not applied: ${applied.reason}`);
  }
}

/** A `saga` task whose `charge` fails for good: reserve's compensation runs; it ends compensated at `now + 40`. */
async function compensated(c: Ctx, taskId: string, now: number): Promise<void> {
  await create(c, taskId, 'saga', now);
  await c.store.applyResult(result(taskId, 'reserve', 1, now + 10, { ok: true, output: { held: 3 } }));
  await c.store.applyResult(result(taskId, 'charge', 1, now + 20, { ok: false, message: 'card declined' }));
  await c.store.applyResult(result(taskId, 'reserve', 1, now + 40, { ok: true, output: { released: 3 } }, 'compensate'));
}

/**
 * A `saga` task cancelled while charge runs: the undo waits for charge, whose service refuses it (nothing
 * applied), so charge is abandoned and only reserve is compensated; it ends cancelled at `now + 40`.
 */
async function cancelled(c: Ctx, taskId: string, now: number): Promise<void> {
  await create(c, taskId, 'saga', now);
  await c.store.applyResult(result(taskId, 'reserve', 1, now + 10, { ok: true, output: { held: 3 } }));
  await c.store.cancelTask({ lease: HELD, taskId, reason: 'customer changed their mind', now: now + 20, schedulerId: 'sched-1' });
  await c.store.applyResult(result(taskId, 'charge', 1, now + 20, { ok: false, message: 'card declined' }));
  await c.store.applyResult(result(taskId, 'reserve', 1, now + 40, { ok: true, output: { released: 3 } }, 'compensate'));
}

async function rawTask(c: Ctx, taskId: string): Promise<Record<string, string>> {
  const h = await r().hgetallBuffer(c.store.keys.task(taskId));
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, v.toString('hex')]));
}

async function indexed(c: Ctx, which: 'compact' | 'finished' | 'tasks'): Promise<string[]> {
  return indexMembers(r(), c.store, which);
}

/** Bytes of the task hash plus its share of the tasks and finished indexes. */
async function bytesPerTask(c: Ctx, taskId: string): Promise<{ hash: number; total: number }> {
  const hash = Number(await r().memory('USAGE', c.store.keys.task(taskId), 'SAMPLES', '0'));
  let index = 0;
  const b = c.store.keys.forTask(taskId);
  for (const z of [b.tasks, b.finished]) {
    const [bytes, card] = await Promise.all([r().memory('USAGE', z, 'SAMPLES', '0'), r().zcard(z)]);
    if (card > 0) index += Number(bytes) / card;
  }
  return { hash, total: hash + index };
}

/** What a compacted task's state is expected to be: the full one less what the rules drop (`undo`: a compensated or cancelled task, which keeps its input and completion order). */
function lessDropped(full: TaskState, undo: boolean): TaskState {
  const { lockedBy: _lockedBy, input: fullInput, deadlineAt: _deadlineAt, ...rest } = full;
  return {
    ...rest,
    ...(undo ? { input: fullInput } : { input: undefined }),
    lockEpoch: 0,
    updatedAt: full.finishedAt ?? full.updatedAt,
    compacted: true,
    steps: full.steps.map((s) => {
      const { lockedBy: _l, completeBy: _c, order, compensation, effect: _e, giveUpAt: _g, circuitCount: _n, ...step } = s;
      const out = { ...step, ...(undo && order !== undefined ? { order } : {}) };
      if (!compensation) return out;
      const { lockedBy: _cl, completeBy: _cc, parked: _cp, giveUpAt: _cg, circuitCount: _cn, ...comp } = compensation;
      return { ...out, compensation: comp };
    }),
  };
}

// ---------------------------------------------------------------------------------------------

describe('compaction', () => {
  it('compacts a completed task into a listpack under the budget; getTask shows the same steps, statuses, outputs and times', async () => {
    const c = await setup();
    await completed(c, 'done-1', T0);
    const before = await c.store.getTask('done-1');
    if (!before) throw new Error('no task');
    expect(before.status).toBe('completed');
    expect(await indexed(c, 'compact')).toEqual(['done-1']);
    expect(await r().object('ENCODING', c.store.keys.task('done-1'))).toBe('hashtable');
    const full = await bytesPerTask(c, 'done-1');

    expect(await c.store.compactFinished(T0 + 30, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });

    expect(await r().object('ENCODING', c.store.keys.task('done-1'))).toBe('listpack');
    const compact = await bytesPerTask(c, 'done-1');
    expect(compact.total).toBeLessThanOrEqual(BUDGET_BYTES);
    expect(compact.hash).toBeLessThan(full.hash / 2);
    expect((await r().hkeys(c.store.keys.task('done-1'))).sort()).toEqual(
      ['id', 'workflow', 'version', 'status', 'seq', 'createdAt', 'finishedAt', 'client', 'k:reserve', 'o:reserve', 'k:charge', 'o:charge', 'k:ship', 'o:ship', 'c'].sort(),
    );
    expect(await r().hget(c.store.keys.task('done-1'), 'k:charge')).toBe('processed|1|0|10|20');

    const after = await c.store.getTask('done-1');
    expect(after).toEqual(lessDropped(before, false));
    expect(after?.steps.map((s) => [s.name, s.agent, s.status, s.dependsOn])).toEqual([
      ['reserve', 'inventory', 'processed', []],
      ['charge', 'payment', 'processed', ['reserve']],
      ['ship', 'shipping', 'processed', ['charge']],
    ]);
    expect(await indexed(c, 'compact')).toEqual([]);
    expect(await indexed(c, 'finished')).toEqual(['done-1']);
    const [summary] = await c.store.listTasks({ limit: 10 });
    expect(summary).toEqual({ taskId: 'done-1', workflow: 'linear', version: 1, status: 'completed', createdAt: T0, updatedAt: T0 + 30 });
    // Compacting again finds nothing.
    expect(await c.store.compactFinished(T0 + 1_000, 100, EPOCH)).toEqual({ compacted: 0, skipped: 0 });
  });

  it.each([
    ['compensated', compensated],
    ['cancelled', cancelled],
  ] as const)('compacts a %s task keeping its undo history and its input', async (status, run) => {
    const c = await setup();
    await run(c, 'undo-1', T0);
    const before = await c.store.getTask('undo-1');
    if (!before) throw new Error('no task');
    expect(before.status).toBe(status);
    expect(before.steps.find((s) => s.name === 'reserve')?.compensation?.finishedAt).toBe(T0 + 40);

    expect(await c.store.compactFinished(T0 + 40, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });

    expect(await r().object('ENCODING', c.store.keys.task('undo-1'))).toBe('listpack');
    expect((await bytesPerTask(c, 'undo-1')).total).toBeLessThanOrEqual(BUDGET_BYTES);
    // status|attempt|failures|started|finished|order|undo attempt|undo failures|undo started|undo finished (ms since createdAt).
    expect(await r().hmget(c.store.keys.task('undo-1'), 'k:reserve', 'k:charge', 'k:ship')).toEqual([
      'compensated|1|0|0|10|1|1|0|20|40',
      `${status === 'compensated' ? 'failed' : 'abandoned'}|1|0|10|20`,
      'pending|0|0',
    ]);
    const after = await c.store.getTask('undo-1');
    expect(after).toEqual(lessDropped(before, true));
    expect(after?.input).toEqual({ orderId: 'o-1', amount: 42 });
    expect(after?.steps.find((s) => s.name === 'reserve')?.compensation).toEqual({ agent: 'refunds', attempt: 1, failureCount: 0, startedAt: T0 + 20, finishedAt: T0 + 40 });
  });

  it('never compacts a task that can be retried (failed, compensation_failed): it keeps its full record', async () => {
    const c = await setup();
    await create(c, 'failed-1', 'linear', T0);
    await c.store.applyResult(result('failed-1', 'reserve', 1, T0 + 10, { ok: false, message: 'out of stock' }));
    await create(c, 'cfailed-1', 'saga', T0);
    await c.store.applyResult(result('cfailed-1', 'reserve', 1, T0 + 10, { ok: true, output: { held: 1 } }));
    await c.store.applyResult(result('cfailed-1', 'charge', 1, T0 + 20, { ok: false, message: 'card declined' }));
    await c.store.applyResult(result('cfailed-1', 'reserve', 1, T0 + 30, { ok: false, message: 'warehouse offline' }, 'compensate'));
    expect((await c.store.getTask('failed-1'))?.status).toBe('failed');
    expect((await c.store.getTask('cfailed-1'))?.status).toBe('compensation_failed');
    expect(await indexed(c, 'compact')).toEqual([]);
    expect((await indexed(c, 'finished')).sort()).toEqual(['cfailed-1', 'failed-1']);

    const raw = { failed: await rawTask(c, 'failed-1'), cfailed: await rawTask(c, 'cfailed-1') };
    expect(await c.store.compactFinished(T0 + 60_000, 100, EPOCH)).toEqual({ compacted: 0, skipped: 0 });
    // Even a stray index entry is skipped: the script checks the status itself.
    await r().zadd(c.store.keys.forTask('failed-1').compact, T0, 'failed-1');
    expect(await c.store.compactFinished(T0 + 60_000, 100, EPOCH)).toEqual({ compacted: 0, skipped: 1 });
    expect({ failed: await rawTask(c, 'failed-1'), cfailed: await rawTask(c, 'cfailed-1') }).toEqual(raw);
    expect((await c.store.getTask('failed-1'))?.compacted).toBeUndefined();
  });

  it('refuses a stale epoch and changes nothing', async () => {
    const c = await setup();
    await completed(c, 'done-1', T0);
    const raw = await rawTask(c, 'done-1');
    await c.store.fenceBuckets(EPOCH + 1);
    const err = await c.store.compactFinished(T0 + 60_000, 100, EPOCH).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isTriadError(err, 'STALE')).toBe(true);
    expect((err as Error).message).toMatch(/newer fencing epoch/);
    expect(await rawTask(c, 'done-1')).toEqual(raw);
    expect(await indexed(c, 'compact')).toEqual(['done-1']);
    // The new leader's epoch is accepted.
    expect(await c.store.compactFinished(T0 + 60_000, 100, EPOCH + 1)).toEqual({ compacted: 1, skipped: 0 });
  });

  it('compacts nothing before its delay, and at most `limit` per call, oldest first', async () => {
    const c = await setup();
    await completed(c, 'early', T0); // finishes at T0 + 30
    await completed(c, 'middle', T0 + 1_000); // T0 + 1030
    await completed(c, 'late', T0 + 2_000); // T0 + 2030
    const raw = await rawTask(c, 'late');
    // A sweep at `now` with compactAfterMs d compacts what finished at or before now − d.
    expect(await c.store.compactFinished(T0 + 29, 100, EPOCH)).toEqual({ compacted: 0, skipped: 0 });
    expect(await c.store.compactFinished(T0 + 2_029, 1, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    expect((await c.store.getTask('early'))?.compacted).toBe(true);
    expect((await c.store.getTask('middle'))?.compacted).toBeUndefined();
    expect(await c.store.compactFinished(T0 + 2_029, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    expect((await c.store.getTask('middle'))?.compacted).toBe(true);
    expect(await indexed(c, 'compact')).toEqual(['late']);
    expect(await rawTask(c, 'late')).toEqual(raw);
  });

  it('purge removes compacted and not yet compacted tasks with every index entry', async () => {
    const c = await setup();
    await completed(c, 'compacted', T0);
    await completed(c, 'not-yet', T0 + 100);
    expect(await c.store.compactFinished(T0 + 30, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    expect(await indexed(c, 'compact')).toEqual(['not-yet']);

    expect(await c.store.purgeFinished(T0 + 1_000, 100, EPOCH)).toBe(2);
    for (const id of ['compacted', 'not-yet']) {
      expect(await r().exists(c.store.keys.task(id))).toBe(0);
      expect(await c.store.getTask(id)).toBeUndefined();
    }
    for (const z of ['compact', 'finished', 'tasks'] as const) expect(await indexed(c, z)).toEqual([]);
  });

  it('a large output leaves that record a hashtable, still read back correctly', async () => {
    const c = await setup();
    const big = 'x'.repeat(300);
    await completed(c, 'big-1', T0, (s) => (s === 'charge' ? { receipt: big } : { done: s }));
    const before = await c.store.getTask('big-1');
    if (!before) throw new Error('no task');
    expect(await c.store.compactFinished(T0 + 30, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    expect(await r().object('ENCODING', c.store.keys.task('big-1'))).toBe('hashtable');
    expect(await c.store.getTask('big-1')).toEqual(lessDropped(before, false));
  });

  it('without its pinned workflow version, a compacted task still shows its steps in plan order', async () => {
    const c = await setup();
    await completed(c, 'done-1', T0);
    expect(await c.store.compactFinished(T0 + 30, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    await r().del(c.store.keys.workflow('linear'));
    const t = await new TaskStore(r(), c.store.namespace).getTask('done-1');
    expect(t?.steps.map((s) => [s.name, s.agent, s.status, s.finishedAt])).toEqual([
      ['reserve', '', 'processed', T0 + 10],
      ['charge', '', 'processed', T0 + 20],
      ['ship', '', 'processed', T0 + 30],
    ]);
  });

  it('a late result for a compacted task is rejected as stale and changes nothing', async () => {
    const c = await setup();
    await completed(c, 'done-1', T0);
    expect(await c.store.compactFinished(T0 + 30, 100, EPOCH)).toEqual({ compacted: 1, skipped: 0 });
    const raw = await rawTask(c, 'done-1');
    const late = await c.store.applyResult(result('done-1', 'ship', 1, T0 + 60, { ok: true, output: {} })).then(
      (o) => (o.applied ? 'applied' : o.reason),
      (e: unknown) => (isTriadError(e) ? e.code : String(e)),
    );
    expect(late).toMatch(/compacted/);
    expect(await rawTask(c, 'done-1')).toEqual(raw);
  });
});
