// Decision 0021 §3 (issue #25 item 3), from real states through the CLI: a step in flight is named with the
// agent instance that holds it (the probe, answered by the example's agent host), a step waits for its
// dependency, a request no agent took says so with its queue, a passed complete-by says no supervisor is
// leading, and `triad stuck` lists a task past its bound and an overdue one — not a healthy one. The texts
// of every reason are in apps/cli/test/waiting.test.ts; the not-picked-up text in search.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan, validateDefinition } from '@triad/core';
import { encode } from '@triad/protocol';
import { TaskStore } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

/** reserve calls inventory (made to hang), charge waits for it: a long budget, so it stays in flight. */
const healthy = {
  name: 'healthy',
  steps: [
    { name: 'reserve', agent: 'inventory', budgetMs: 600_000 },
    { name: 'charge', agent: 'payment', budgetMs: 600_000, dependsOn: ['reserve'] },
  ],
};
/** A short budget and one attempt: its complete-by passes soon, and its bound is small. */
const quick = { name: 'quick', defaults: { ladder: { maxFailures: 1, retries: 0 } }, steps: [{ name: 'hold', agent: 'inventory', budgetMs: 1_000 }] };

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(td, { nats, redis }, { registerOrders: false, supervisor: { intervalMs: 200, leaseMs: 1_500 }, faults: { inventory: { hangRate: 1 } } });
  for (const wf of [healthy, quick]) await t.client.registerWorkflow(wf);
}, 120_000);

const status = async (taskId: string): Promise<string> => {
  const r = await cli(t, ['status', taskId]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
};
const stepLine = (out: string, step: string): string => out.split('\n').find((l) => l.startsWith(`${step} `)) ?? '';

describe('why a step waits, from real states (decision 0021 §3)', () => {
  it('in flight at the agent instance holding it (the probe), and its dependent waiting for it', async () => {
    const { taskId } = await t.client.submit('healthy', { orderId: 'w-1', amount: 10 });
    // The call has reached the service: the agent holds the attempt.
    await waitFor(() => (t.services.inventory.waiting().some((w) => w.idempotencyKey.includes(taskId)) ? true : undefined), { timeoutMs: 20_000, what: 'reserve to call inventory' });
    const out = await status(taskId);
    expect(stepLine(out, 'reserve')).toMatch(/in flight at agent-\S+ \(try 1, since \d\d:\d\d:\d\d\) until complete-by \d\d:\d\d:\d\d \(in \d+m\d\ds\)/);
    expect(stepLine(out, 'charge')).toContain('waiting for reserve');
    expect(out).toMatch(/^waiting: +reserve: in flight at agent-/m);
    const json = JSON.parse((await cli(t, ['status', taskId, '--json'])).stdout) as { steps: { name: string; waiting?: { kind: string; holder?: { agentId: string } } }[] };
    expect(json.steps.find((s) => s.name === 'reserve')?.waiting).toMatchObject({ kind: 'in_flight', holder: { agentId: expect.stringMatching(/^agent-/) as unknown } });
    // Without the probe it names the agent type only.
    expect(stepLine((await cli(t, ['status', taskId, '--no-explain'])).stdout, 'reserve')).toMatch(/in flight at a inventory agent \(attempt 1\)/);
  });

  it('triad stuck lists a task past its bound and an overdue one (no supervisor leading), not a healthy one; the overdue step says no supervisor leads; a request no agent took says so', async () => {
    const { taskId: healthyId } = await t.client.submit('healthy', { orderId: 'w-2', amount: 10 });
    await waitFor(() => (t.services.inventory.waiting().some((w) => w.idempotencyKey.includes(healthyId)) ? true : undefined), { timeoutMs: 20_000, what: 'the healthy task to call inventory' });
    // No supervisor: nothing acts on a passed deadline.
    for (const s of t.supervisors) await s.kill();
    await waitFor(async () => ((await t.client.supervisorStatus()).leader ? undefined : true), { timeoutMs: 20_000, what: 'the leadership to lapse' });
    const { taskId: lateId } = await t.client.submit('quick', { orderId: 'w-3', amount: 10 });
    // A task created an hour ago (as a scheduler creates it): long past its bound.
    const plan = compilePlan(validateDefinition(quick));
    const lease = { key: `${t.namespace}:test:lease`, token: 'tok', ms: 600_000 };
    await t.redis.set(lease.key, lease.token);
    await new TaskStore(t.redis, t.namespace).createTask({ lease, taskId: 'old-1', workflow: 'quick', version: 1, input: encode({}), plan, onFailure: 'error', client: 'default', now: Date.now() - 3_600_000, schedulerId: 'seed' });

    const late = await waitFor(
      async () => {
        const out = await status(lateId);
        return /no supervisor is leading/.test(stepLine(out, 'hold')) ? out : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: "the quick task's complete-by to pass" },
    );
    expect(stepLine(late, 'hold')).toMatch(/complete-by passed [\d.]+m?s ago: no supervisor is leading — start one \(triad supervisor\)/);

    type Stuck = { tasks: { summary: { taskId: string }; why: string; waiting?: { step: string; kind: string } }[]; complete: boolean };
    const stuck = await waitFor(
      async () => {
        const r = await cli(t, ['stuck', '--json']);
        expect(r.code, r.stderr).toBe(0);
        const j = JSON.parse(r.stdout) as Stuck;
        return j.tasks.some((x) => x.summary.taskId === lateId) ? j : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'the overdue task to be listed (past the grace)' },
    );
    const ids = stuck.tasks.map((x) => x.summary.taskId);
    expect(ids).toContain('old-1');
    expect(ids).not.toContain(healthyId);
    expect(stuck.tasks.find((x) => x.summary.taskId === 'old-1')?.why).toBe('both');
    expect(['overdue', 'both']).toContain(stuck.tasks.find((x) => x.summary.taskId === lateId)?.why);
    expect(stuck.tasks.find((x) => x.summary.taskId === lateId)?.waiting).toMatchObject({ step: 'hold', kind: 'overdue' });
    expect(stuck.complete).toBe(true);
    const text = await cli(t, ['stuck', '--workflow', 'quick']);
    expect(text.stdout).toMatch(/^TASK +WORKFLOW +STATUS +CREATED +LATE +LAST PROGRESS +WAITING$/m);
    expect(text.stdout).toMatch(/old-1 +quick@1 +running .*past its bound, a deadline passed/);
    expect((await cli(t, ['stuck', '--workflow', 'healthy'])).stdout).toContain('no stuck task');

    // The agents stop: a new request waits in STEPS, taken by no agent.
    for (const a of t.agents) await a.kill();
    const { taskId: queuedId } = await t.client.submit('healthy', { orderId: 'w-4', amount: 10 });
    const queued = await waitFor(
      async () => {
        const out = await status(queuedId);
        return /not yet taken/.test(stepLine(out, 'reserve')) ? out : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'the request to wait in STEPS' },
    );
    expect(stepLine(queued, 'reserve')).toMatch(/not yet taken by any inventory agent: [1-9]\d* requests? waits?, \d+ agents? pulling; complete-by /);
  });
});
