// Decision 0021 §2, done-when (2), on real processes: `triad cancel --where customer=c-42 --status running
// --yes` cancels and undoes exactly the 100 running tasks of c-42 among others (each reservation undone
// once, the ledger says); a run killed -9 halfway and run again with its --op acts on each task once (the
// operation's id is in each task's `bo` once); --dry-run shows the count and a sample and changes nothing;
// without --yes and no terminal the command exits 2; `triad retry --where` retries failed tasks once.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan, validateDefinition } from '@triad/core';
import { encode, type BulkOp, type WorkflowDefinitionInput } from '@triad/protocol';
import { TaskStore } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

/** A reservation (undone by its compensation), then a wait for a signal that never comes: running with an effect to undo. */
const held: WorkflowDefinitionInput = {
  name: 'held',
  onFailure: 'compensate',
  steps: [
    { name: 'reserve', agent: 'worker', budgetMs: 10_000, compensate: { agent: 'worker', budgetMs: 10_000 } },
    { name: 'approval', waitFor: { signal: 'go', timeoutMs: 3_600_000 }, dependsOn: ['reserve'] },
  ],
};
const stuck = { name: 'stuck', steps: [{ name: 'hang', agent: 'nobody', budgetMs: 3_600_000 }] };
const stuckPlan = compilePlan(validateDefinition(stuck));
const LEASE = { key: 'test:lease', token: 'test-token', ms: 600_000 };
const C42 = Array.from({ length: 100 }, (_, i) => `c42-${String(i).padStart(3, '0')}`);
const OTHERS = Array.from({ length: 20 }, (_, i) => `c7-${i}`);

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor: { intervalMs: 200, leaseMs: 2_000 } });
  await t.startSagaAgents();
  await t.client.registerWorkflow(held);
  await t.client.registerWorkflow(stuck);
  await Promise.all([...C42.map((id) => t.client.submit('held', {}, { taskId: id, tags: { customer: 'c-42' } })), ...OTHERS.map((id) => t.client.submit('held', {}, { taskId: id, tags: { customer: 'c-7' } }))]);
  // 2,000 more running tasks of other customers, created as a scheduler creates them.
  await t.redis.set(LEASE.key, LEASE.token);
  const store = new TaskStore(t.redis, t.namespace);
  for (let i = 0; i < 2_000; i += 500) {
    await Promise.all(
      Array.from({ length: 500 }, (_, j) => store.createTask({ lease: LEASE, taskId: `bg-${i + j}`, workflow: 'stuck', version: 1, input: encode({}), plan: stuckPlan, onFailure: 'error', client: 'default', now: Date.now(), schedulerId: 'seed', tags: { customer: `c-${100 + ((i + j) % 50)}` } })),
    );
  }
  // Every held task reserved and waiting.
  await waitFor(async () => {
    const states = await Promise.all([...C42, ...OTHERS].map((id) => t.client.getTask(id).catch(() => undefined)));
    return states.every((s) => s?.steps.find((x) => x.name === 'approval')?.status === 'waiting');
  }, { timeoutMs: 90_000, what: 'the 120 held tasks to reserve and wait' });
}, 180_000);

const ledgerKey = (taskId: string): string => `${t.namespace}/${taskId}/reserve`;

describe('bulk cancel and retry (decision 0021)', () => {
  it('--dry-run shows the count and a sample and changes nothing; without --yes and a terminal it exits 2', async () => {
    const dry = await cli(t, ['cancel', '--where', 'customer=c-42', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/^would cancel 100 tasks \(customer=c-42, status running\), about 2\.0s at 50\/s:$/m);
    expect(dry.stdout.split('\n').filter((l) => /^c42-\d{3}\s+held@1\s+running\s/.test(l))).toHaveLength(10);
    const noYes = await cli(t, ['cancel', '--where', 'customer=c-42']);
    expect(noYes.code).toBe(2);
    expect(noYes.stderr).toMatch(/100 tasks match: add --yes to act on them without a prompt \(or --dry-run to see them\)/);
    expect((await t.client.countTasks({ tags: { customer: 'c-42' }, status: 'running' })).count).toBe(100);
    const both = await cli(t, ['cancel', 'c42-000', '--where', 'customer=c-42']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give a task id or --where, not both/);
  });

  it('a bulk cancel killed halfway and run again with its --op acts on each of the 100 once, and only on them', async () => {
    const child = spawn(process.execPath, ['apps/cli/bin/triad.js', 'cancel', '--where', 'customer=c-42', '--status', 'running', '--yes', '--rate', '5', '--op', 'bulk-kill'], {
      cwd: new URL('../../', import.meta.url),
      env: { ...process.env, ...t.env },
      stdio: 'ignore',
    });
    const exited = new Promise((r) => child.once('exit', r));
    try {
      await waitFor(async () => {
        const op = await t.client.bulkOperation('bulk-kill').catch(() => undefined);
        return op !== undefined && op.acted >= 30;
      }, { timeoutMs: 60_000, what: 'the first run to act on 30 tasks' });
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    const halfway = await t.client.bulkOperation('bulk-kill');
    expect(halfway.state).toBe('running'); // killed: it never said it stopped
    expect(halfway.acted).toBeLessThan(100);

    const rerun = await cli(t, ['cancel', '--op', 'bulk-kill', '--yes', '--json']);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stderr).toMatch(/resuming bulk-kill/);
    const op = JSON.parse(rerun.stdout) as BulkOp;
    expect(op).toMatchObject({ id: 'bulk-kill', state: 'done', skipped: 0, missing: 0, failed: 0, matched: 100 });
    // The batch in flight when the first run died was replayed: what it had done answers "already".
    expect(op.acted + op.already).toBe(100);

    // Each of the 100 was acted on once: the operation's id once in its bo; each ends cancelled, its reservation undone once.
    await waitFor(async () => (await t.client.countTasks({ tags: { customer: 'c-42' }, status: 'cancelled' })).count === 100, { timeoutMs: 60_000, what: 'the 100 to be cancelled' });
    for (const id of C42) {
      const bo = JSON.parse((await t.redis.hget(`${new TaskStore(t.redis, t.namespace).keys.task(id)}`, 'bo')) ?? '[]') as string[];
      expect(bo.filter((x) => x === 'bulk-kill'), id).toHaveLength(1);
    }
    const effects = new Map(t.ledger.effects().map((e) => [e.idempotencyKey, e]));
    for (const id of C42) expect(effects.get(ledgerKey(id)), id).toMatchObject({ undone: true, reversals: 1 });
    // Nobody else was touched.
    for (const id of OTHERS) expect(effects.get(ledgerKey(id))?.undone, id).toBe(false);
    expect((await t.client.countTasks({ tags: { customer: 'c-7' }, status: 'running' })).count).toBe(20);
    expect((await t.client.countTasks({ workflow: 'stuck', status: 'running' })).count).toBe(2_000);

    // Run again: nothing left to act on (they are no longer running), and triad ops shows the operation.
    const again = await cli(t, ['cancel', '--where', 'customer=c-42', '--yes', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ acted: 0, matched: 0 });
    const ops = await cli(t, ['ops', 'bulk-kill']);
    expect(ops.stdout).toMatch(/^state:\s+done$/m);
  });

  it('triad retry --where retries each failed task once', async () => {
    const store = new TaskStore(t.redis, t.namespace);
    const ids = Array.from({ length: 30 }, (_, i) => `f-${i}`);
    for (const id of ids) {
      await store.createTask({ lease: LEASE, taskId: id, workflow: 'stuck', version: 1, input: encode({}), plan: stuckPlan, onFailure: 'error', client: 'default', now: Date.now(), schedulerId: 'seed', tags: { batch: 'r1' } });
      await store.applyResult({ lease: LEASE, taskId: id, step: 'hang', kind: 'run', attempt: 1, now: Date.now(), schedulerId: 'seed', agentId: 'a', agentType: 'nobody', outcome: { ok: false, message: 'declined', retryable: false, effect: 'none' } });
    }
    expect((await t.client.countTasks({ tags: { batch: 'r1' }, status: 'failed' })).count).toBe(30);
    const r = await cli(t, ['retry', '--where', 'batch=r1', '--yes', '--op', 'retry-r1', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ acted: 30, already: 0, state: 'done' });
    expect((await t.client.countTasks({ tags: { batch: 'r1' }, status: 'running' })).count).toBe(30);
    for (const id of ids) expect((await t.client.getTask(id)).steps[0]).toMatchObject({ status: 'processing', attempt: 2 });
    // The same operation again: every task answers "already" (and a new filter under that id is refused).
    const again = await cli(t, ['retry', '--op', 'retry-r1', '--yes', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ state: 'done', acted: 30, batch: 1 });
    const other = await cli(t, ['retry', '--where', 'batch=r2', '--op', 'retry-r1', '--yes']);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/operation retry-r1 exists with another action or filter/);
  });
});
