// Decision 0020 §6, what issue #24's point 5 asks to see, through the CLI as a user runs it and the
// actors' /metrics: `triad status` says a step waits for a limit and its place in line (read from the
// limiter by task.get); `triad limits list --keys` shows in flight and waiting per key; the metrics
// triad_limit_granted_total, triad_limit_wait_seconds (schedulers), triad_limit_paused (the leader
// supervisor) and triad_limit_throttled_total (a service answering 429). Counts, places and texts only.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentLimitStatus } from '@triad/protocol';
import { startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { TaskStore } from '@triad/store';
import { cli, cliOk, startTriad } from '../support/triad.js';

const servers = withTeardown(afterAll);
const td = withTeardown(afterEach);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: servers }), startRedis({ teardown: servers })]);
});

/** The CLI as a user runs it (fails the test when it does not exit 0). */
const triad = cliOk;

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, withinMs = 60_000): Promise<T> {
  const end = Date.now() + withinMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`${what} within ${withinMs} ms; last seen: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** The lines of an actor's /metrics for this namespace and agent payment, by metric name prefix. */
async function metrics(port: string, ns: string, prefix: string): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(prefix) && l.includes(`namespace="${ns}"`) && l.includes('agent="payment"'));
}

const portOf = (output: string): string => {
  const port = /serving \/metrics, \/healthz and \/readyz on port (\d+)/.exec(output)?.[1];
  if (port === undefined) throw new Error(`no metrics port in the actor's output:\n${output.slice(-2_000)}`);
  return port;
};

const valueOf = (line: string | undefined): number => Number(line?.split(' ').pop() ?? NaN);

describe("a waiting step's place, the keys' table and the limits' metrics (decision 0020 §6)", () => {
  it('triad status says a charge waits for a limit of payment and its place; limits list --keys shows the keys; granted and wait metrics count', async () => {
    const t = await startTriad(td, { nats, redis }, { schedulers: 1, agentProcesses: 1, env: { TRIAD_HTTP_PORT: '0', TRIAD_HTTP_HOST: '127.0.0.1' } });
    expect((await t.client.wait((await t.client.submit('orders', { orderId: 'warm', amount: 1 })).taskId, { timeoutMs: 60_000 })).status).toBe('completed');
    // One charge at a time, 4 s each (the charge budget is 5 s): the line barely moves while it is read.
    t.services.payment.setFaults({ latencyMs: 4_000 });
    const set = await cli(t, ['limits', 'set', 'payment', '--concurrency', '1', '--key', 'input.customerId']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('per input.customerId: keys take turns');
    // The example's orders set no deadlineMs: waiting for this limit is outside their bounds (decision 0020 §5.6).
    expect(set.stderr).toContain('warning: workflow orders calls payment and sets no deadlineMs: their tasks may now wait for this limit without a bound');
    // `workflows show` says so after the bounds; a workflow registered now is warned too.
    const show = await triad(t, 'workflows', 'show', 'orders');
    expect(show).toMatch(/^limits now: payment — at most 1 at once; per input\.customerId: keys take turns \(0 waiting\)$/m);
    expect(show).toMatch(/^ {2}steps calling payment may wait for that limit before each start \(at most \d+ starts per phase with (its|their) ladders?\);$/m);
    expect(show).toContain("waiting is not part of the bounds above. deadlineMs (not set) would cap the task's total time.");
    const reg = await t.client.registerWorkflow({ name: 'refunds-nodeadline', steps: [{ name: 'refund', agent: 'payment', budgetMs: 2_000 }] });
    expect(reg.warnings).toContain("agent \"payment\" has a dispatch limit and this workflow sets no deadlineMs: its tasks may wait for that limit without a bound (set deadlineMs to cap a task's total time)");
    const bounded = await t.client.registerWorkflow({ name: 'refunds-bounded', deadlineMs: 60_000, steps: [{ name: 'refund', agent: 'payment', budgetMs: 2_000 }] });
    expect(bounded.warnings.filter((w) => w.includes('dispatch limit'))).toEqual([]);
    await new Promise((r) => setTimeout(r, 1_300)); // every scheduler's cache within 1 s
    const ids: string[] = [];
    for (const [i, customerId] of ['A', 'A', 'A', 'A', 'B', 'B'].entries()) ids.push((await t.client.submit('orders', { orderId: `v-${i}`, amount: 10, customerId })).taskId);
    await until('three charges waiting for payment', async () => (JSON.parse(await triad(t, 'limits', 'list', '--json')) as AgentLimitStatus[])[0], (p) => (p?.waiting ?? 0) >= 3);

    // Each waiting charge has a place; together they are the places 1 … n (the grants before each, exact).
    // Read with the SDK's task.get (what `triad status` shows), all at once: the line must not move meanwhile.
    const snapshot = async (): Promise<{ id: string; place?: number; key?: string }[]> => {
      const rows: { id: string; place?: number; key?: string }[] = [];
      for (const s of await Promise.all(ids.map((id) => t.client.getTask(id)))) {
        const id = s.taskId;
        const charge = s.steps.find((x) => x.name === 'charge');
        if (charge?.status !== 'queued' || !charge.queue) continue;
        rows.push({ id, ...(charge.queue.place !== undefined ? { place: charge.queue.place } : {}), ...(charge.queue.key !== undefined ? { key: charge.queue.key } : {}) });
      }
      return rows;
    };
    const rows = await until(
      'the waiting charges to hold the places 1 … n',
      snapshot,
      (r) => r.length >= 2 && r.every((x) => x.place !== undefined) && [...r.map((x) => x.place)].sort((a, b) => (a ?? 0) - (b ?? 0)).every((p, i) => p === i + 1),
      20_000,
    );
    // B's first charge is not behind A's line: keys take turns, so it is first or second.
    const b = rows.filter((r) => r.key === 'B').map((r) => r.place ?? 0);
    if (b.length > 0) expect(Math.min(...b)).toBeLessThanOrEqual(2);

    // What a user reads: the DETAIL of the charge row (the last in line: the one least likely to start meanwhile).
    const last = rows.reduce((a, b) => ((b.place ?? 0) > (a.place ?? 0) ? b : a));
    const text = await triad(t, 'status', last.id);
    expect(text).toMatch(/waits for a limit of payment: place \d+ \(key [AB], priority 3, [\d.]+m?s so far\)/);
    expect(text).toMatch(/queued/);

    // The keys' table: per key, in flight and waiting; --keys 1 only the key with the most waiting.
    const table = await triad(t, 'limits', 'list', '--keys');
    expect(table).toMatch(/payment: keys with the most waiting/);
    expect(table).toMatch(/^KEY\s+IN FLIGHT\s+WAITING\s+OLDEST\s+BLOCKED/m);
    expect(table).toMatch(/^A\s+\d+\s+\d+/m);
    const one = JSON.parse(await triad(t, 'limits', 'list', '--keys', '1', '--json')) as AgentLimitStatus[];
    expect(one[0]?.keys).toHaveLength(1);
    expect(one[0]?.keys?.[0]?.key).toBe('A');

    const ended = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 120_000 })));
    expect(ended.map((s) => s.status)).toEqual(ids.map(() => 'completed'));
    // A finished step has no place: the detail says nothing of a limit any more.
    expect(await triad(t, 'status', ids[0] as string)).not.toMatch(/waits for a limit/);

    // The scheduler counted the grants and observed the waits; the leader reports the pause gauge (0: no Retry-After).
    const sched = portOf(t.schedulers[0]!.output());
    expect(valueOf((await metrics(sched, t.namespace, 'triad_limit_granted_total{'))[0])).toBeGreaterThanOrEqual(ids.length);
    expect(valueOf((await metrics(sched, t.namespace, 'triad_limit_wait_seconds_count{'))[0])).toBeGreaterThanOrEqual(ids.length);
    const sup = portOf(t.supervisors[0]!.output());
    await until('the leader to report triad_limit_paused', () => metrics(sup, t.namespace, 'triad_limit_paused{'), (l) => l.length === 1, 10_000);
    expect(valueOf((await metrics(sup, t.namespace, 'triad_limit_paused{'))[0])).toBe(0);
  });

  it('a service answering 429: the throttles are counted (triad_limit_throttled_total) and every order completes', async () => {
    const t = await startTriad(td, { nats, redis }, { schedulers: 1, agentProcesses: 1, env: { TRIAD_HTTP_PORT: '0', TRIAD_HTTP_HOST: '127.0.0.1' } });
    expect((await t.client.wait((await t.client.submit('orders', { orderId: 'warm', amount: 1 })).taskId, { timeoutMs: 60_000 })).status).toBe('completed');
    t.services.payment.setFaults({ rateLimit: 2 });
    t.services.payment.resetStats();
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => t.client.submit('orders', { orderId: `th-${i}`, amount: 10 }).then((r) => r.taskId)));
    const ended = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 180_000 })));
    expect(ended.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}: ${s.status} ${s.error ?? ''}`)).toEqual([]);
    const throttled = t.services.payment.stats().throttled;
    expect(throttled).toBeGreaterThan(0);
    const sched = portOf(t.schedulers[0]!.output());
    // Each 429 ends its attempt with a throttled result (decision 0020 §5.2); a stale one is not applied.
    const counted = valueOf((await metrics(sched, t.namespace, 'triad_limit_throttled_total{'))[0]);
    expect(counted).toBeGreaterThan(0);
    expect(counted).toBeLessThanOrEqual(throttled);
  });

  it('the limits1 probe: a limit is refused while an older scheduler or supervisor runs, and set once they are gone (decision 0020 §1.8)', async () => {
    const t = await startTriad(td, { nats, redis }, { schedulers: 1, agentProcesses: 1 });
    // Supervisors report limits1 and their limiter counters (queue_step and pump_limit commands sent).
    const sup = await until('a supervisor report', () => t.client.supervisorStatus(), (st) => st.supervisors.length > 0, 10_000);
    expect(sup.supervisors[0]).toMatchObject({ features: ['limits1'], queueChecks: 0, limitWakes: 0 });
    // Every running process announces limits1: a limit is set.
    expect((await cli(t, ['limits', 'set', 'payment', '--concurrency', '5'])).code).toBe(0);
    // A scheduler of an older version answers discovery without limits1 (as schedulers before 0020 do).
    const old = t.client.bus.nc.subscribe(`$SRV.INFO.triad-${t.namespace}`, {
      callback: (_e, m) => {
        m.respond(new TextEncoder().encode(JSON.stringify({ type: 'io.nats.micro.v1.info_response', name: `triad-${t.namespace}`, id: 'scheduler-old1', version: '0.9.0', metadata: { namespace: t.namespace, protocol: '1', features: 'when,sleep,waitFor,forEach,child' } })));
      },
    });
    const refused = await cli(t, ['limits', 'set', 'payment', '--concurrency', '3']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('scheduler-old1 (protocol 1, no "limits1") must be upgraded before limits can be set');
    old.unsubscribe();
    // An older supervisor's fresh report (no features) refuses it too; a report older than a minute does not.
    const store = new TaskStore(t.redis, t.namespace);
    const report = { supervisorId: 'supervisor-old2', leading: false, epoch: 0, handled: 0, expiredWaiting: 0, retries: 0, parked: 0, errors: 0, undos: 0, purged: 0, fencedWrites: 0 };
    await store.reportSupervisorStatus('supervisor-old2', { ...report, at: Date.now() });
    const bySupervisor = await cli(t, ['limits', 'set', 'payment', '--concurrency', '3']);
    expect(bySupervisor.code).not.toBe(0);
    expect(bySupervisor.stderr).toContain('supervisor supervisor-old2 (no "limits1") must be upgraded before limits can be set');
    await store.reportSupervisorStatus('supervisor-old2', { ...report, at: Date.now() - 120_000 });
    const set = await cli(t, ['limits', 'set', 'payment', '--concurrency', '3']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('payment: at most 3 at once — every scheduler applies it within 1 s (was: at most 5 at once)');
  });
});
