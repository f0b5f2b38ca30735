// Decision 0020 increment 4, the "done when" (#24) with 3 agent hosts and 2 schedulers, the
// example's services and the CLI as a user runs it: a concurrency limit holds at the payment service
// (its own /stats), a rate limit holds in every one-second window of the grants and of the service's
// calls, and after a scheduler is killed with SIGKILL under load no permit is leaked. Counts and
// windows of recorded times only — never durations.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentLimitStatus, TaskState } from '@triad/protocol';
import { startNats, startRedis, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cliOk, startTriad, type TestTriad } from '../support/triad.js';

const servers = withTeardown(afterAll);
const td = withTeardown(afterEach);
let nats: NatsServer;
let redis: RedisServer;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: servers }), startRedis({ teardown: servers })]);
});

/** The CLI as a user runs it (fails the test when it does not exit 0). */
const triad = cliOk;

async function limits(t: TestTriad): Promise<AgentLimitStatus[]> {
  return JSON.parse(await triad(t, 'limits', 'list', '--json')) as AgentLimitStatus[];
}

/** Polls `triad limits list --json` until payment has nothing in flight and nothing waiting; fails with what it last saw. */
async function drained(t: TestTriad, withinMs: number): Promise<void> {
  const until = Date.now() + withinMs;
  let last: AgentLimitStatus[] = [];
  for (;;) {
    last = await limits(t);
    const p = last.find((l) => l.agent === 'payment');
    if (p && p.inFlight === 0 && p.waiting === 0) return;
    if (Date.now() > until) throw new Error(`payment's limiter did not come back to 0 in flight and 0 waiting within ${withinMs} ms: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Three hosts of the example's agents, two schedulers, one supervisor; warmed up with one order. */
async function fleet(): Promise<TestTriad> {
  const t = await startTriad(td, { nats, redis }, { schedulers: 2, agentProcesses: 3, env: { TRIAD_HTTP_PORT: '0', TRIAD_HTTP_HOST: '127.0.0.1' } });
  expect((await t.client.wait((await t.client.submit('orders', { orderId: 'warm', amount: 1 })).taskId, { timeoutMs: 60_000 })).status).toBe('completed');
  return t;
}

/** A limit reaches every scheduler within 1 s (their caches' refresh): wait that out before measuring. */
const propagated = (): Promise<void> => new Promise((r) => setTimeout(r, 1_300));

async function orders(t: TestTriad, n: number, prefix: string): Promise<{ ids: string[]; ended: TaskState[] }> {
  const ids = await Promise.all(Array.from({ length: n }, (_, i) => t.client.submit('orders', { orderId: `${prefix}-${i}`, amount: 10 + i }).then((r) => r.taskId)));
  const ended = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 180_000 })));
  return { ids, ended };
}

function notCompleted(ended: readonly TaskState[]): string[] {
  return ended.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}: ${s.status} ${s.error ?? ''}`);
}

/** The most times of `times` in any window [t, t + windowMs). */
function busiestWindow(times: readonly number[], windowMs: number): number {
  const s = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < s.length; i++) {
    while ((s[i] as number) - (s[j] as number) >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

describe('dispatch limits across 3 agent hosts and 2 schedulers (issue #24)', () => {
  it('--concurrency 3: 40 orders all complete and the payment service never holds more than 3 calls', async () => {
    const t = await fleet();
    t.services.payment.setFaults({ latencyMs: 200 });
    expect(await triad(t, 'limits', 'set', 'payment', '--concurrency', '3')).toContain('payment: at most 3 at once');
    await propagated();
    t.services.payment.resetStats();
    const { ended } = await orders(t, 40, 'conc');
    expect(notCompleted(ended)).toEqual([]);
    const stats = t.services.payment.stats();
    expect(stats.calls.length).toBeGreaterThanOrEqual(40);
    expect(stats.maxInFlight).toBeLessThanOrEqual(3);
    // Charges waited for the limit (40 at 200 ms each could not all run at once under 3): the test can fail.
    const pages = await Promise.all(ended.map((s) => t.client.taskEvents(s.taskId)));
    expect(pages.filter((p) => p.events.some((e) => e.type === 'step_queued' && e.step === 'charge')).length).toBeGreaterThan(0);
    await drained(t, 5_000 + 1_000 + 3 * 200 + 5_000);
    const [p] = await limits(t);
    expect(p).toMatchObject({ agent: 'payment', limit: { agent: 'payment', concurrency: 3 }, inFlight: 0, waiting: 0 });
    // The leader supervisor's gauges say the same (decision 0020 §6).
    const port = /serving \/metrics, \/healthz and \/readyz on port (\d+)/.exec(t.supervisors[0]!.output())?.[1];
    const gauges = async (): Promise<string[]> =>
      (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).split('\n').filter((l) => /^triad_limit_(waiting|in_flight)\{/.test(l) && l.includes(`namespace="${t.namespace}"`) && l.includes('agent="payment"'));
    const deadline = Date.now() + 10_000;
    let lines = await gauges();
    while (!(lines.length === 2 && lines.every((l) => / 0$/.test(l))) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      lines = await gauges();
    }
    expect(lines.sort()).toEqual([`triad_limit_in_flight{namespace="${t.namespace}",agent="payment"} 0`, `triad_limit_waiting{namespace="${t.namespace}",agent="payment"} 0`]);
  });

  it('--rate 20/s --burst 5: no one-second window of grants or of the service\'s calls holds more than 25', async () => {
    const t = await fleet();
    // Held first (1 an hour), so every charge waits in line while the orders' other steps run; then the
    // rate is raised and the line is let go: what payment sees is the limit alone, not this machine's
    // load from 60 orders' first steps (a burst of submissions delays the first calls behind their grants
    // by hundreds of ms and bends the service's window — decision 0020 §3.3, and its settled item 27).
    await triad(t, 'limits', 'set', 'payment', '--rate', '1/h');
    await propagated();
    const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => t.client.submit('orders', { orderId: `rate-${i}`, amount: 10 + i }).then((r) => r.taskId)));
    const until = Date.now() + 120_000;
    for (;;) {
      const p = (await limits(t)).find((l) => l.agent === 'payment');
      if ((p?.waiting ?? 0) >= 59) break;
      if (Date.now() > until) throw new Error(`the charges did not queue behind 1/h: ${JSON.stringify(p)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    t.services.payment.resetStats();
    expect(await triad(t, 'limits', 'set', 'payment', '--rate', '20/s', '--burst', '5')).toContain('payment: 20/s (burst 5)');
    const ended = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 180_000 })));
    expect(notCompleted(ended)).toEqual([]);
    // The grants: a charge's grant time is its complete-by less its budget (5 s in the orders workflow).
    const grants = ended.map((s) => {
      const c = s.steps.find((x) => x.name === 'charge');
      return (c?.completeBy ?? 0) - 5_000;
    });
    const calls = t.services.payment.stats().calls;
    const g = busiestWindow(grants, 1_000);
    const c = busiestWindow(calls, 1_000);
    const logs = `grant times: ${JSON.stringify([...grants].sort((a, b) => a - b))}\ncall times: ${JSON.stringify(calls)}`;
    expect(g, logs).toBeLessThanOrEqual(25);
    expect(c, logs).toBeLessThanOrEqual(25);
    // 59 charges let go at once: without the limit they would reach payment in one window.
    expect(calls.length).toBeGreaterThanOrEqual(59);
  });

  it('--key input.customerId --per-key-concurrency 1: while 60 orders of customer A wait, 5 orders of customer B complete', async () => {
    const t = await fleet();
    t.services.payment.setFaults({ latencyMs: 300 });
    expect(await triad(t, 'limits', 'set', 'payment', '--key', 'input.customerId', '--per-key-concurrency', '1')).toContain('per input.customerId: at most 1 at once');
    await propagated();
    t.services.payment.resetStats();
    const a = await Promise.all(Array.from({ length: 60 }, (_, i) => t.client.submit('orders', { orderId: `a-${i}`, amount: 10, customerId: 'A' }).then((r) => r.taskId)));
    // Once most of A's charges wait in line, B submits.
    const until = Date.now() + 120_000;
    for (;;) {
      const [p] = JSON.parse(await triad(t, 'limits', 'list', '--keys', '--json')) as AgentLimitStatus[];
      const waitingA = p?.keys?.find((k) => k.key === 'A')?.waiting ?? 0;
      if (waitingA >= 50) break;
      if (Date.now() > until) throw new Error(`A's charges did not queue: ${JSON.stringify(p)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const b = await Promise.all(Array.from({ length: 5 }, (_, i) => t.client.submit('orders', { orderId: `b-${i}`, amount: 10, customerId: 'B' }).then((r) => r.taskId)));
    const ended = await Promise.all(b.map((id) => t.client.wait(id, { timeoutMs: 120_000 })));
    expect(notCompleted(ended)).toEqual([]);
    // At that moment most of A still waits: B did not wait behind A's line (keys take turns).
    const aStates = await Promise.all(a.map((id) => t.client.getTask(id)));
    expect(aStates.filter((s) => s.status !== 'completed').length).toBeGreaterThanOrEqual(40);
    expect(t.services.payment.stats().maxInFlight).toBeLessThanOrEqual(2);
  });

  it('priorities: with --concurrency 1, 3 orders at priority 1 complete before most of 10 submitted earlier at priority 5', async () => {
    const t = await fleet();
    t.services.payment.setFaults({ latencyMs: 300 });
    await triad(t, 'limits', 'set', 'payment', '--concurrency', '1');
    await propagated();
    const low = await Promise.all(Array.from({ length: 10 }, (_, i) => t.client.submit('orders', { orderId: `low-${i}`, amount: 10 }, { priority: 5 }).then((r) => r.taskId)));
    const high = await Promise.all(Array.from({ length: 3 }, (_, i) => t.client.submit('orders', { orderId: `high-${i}`, amount: 10 }, { priority: 1 }).then((r) => r.taskId)));
    const ended = await Promise.all(high.map((id) => t.client.wait(id, { timeoutMs: 120_000 })));
    expect(notCompleted(ended)).toEqual([]);
    const lowStates = await Promise.all(low.map((id) => t.client.getTask(id)));
    expect(lowStates.filter((s) => s.status !== 'completed').length).toBeGreaterThanOrEqual(6);
    // The CLI's --priority reaches the task as the SDK's does.
    const cliTask = JSON.parse(await triad(t, 'submit', 'orders', '--priority', '1', '--input', JSON.stringify({ orderId: 'high-cli', amount: 10 }), '--json')) as { taskId: string };
    expect((await t.client.getTask(cliTask.taskId)).priority).toBe(1);
  });

  it('after a scheduler is killed with SIGKILL under load, every order completes and in flight returns to 0', async () => {
    const t = await fleet();
    t.services.payment.setFaults({ latencyMs: 300 });
    await triad(t, 'limits', 'set', 'payment', '--concurrency', '3');
    await propagated();
    t.services.payment.resetStats();
    const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => t.client.submit('orders', { orderId: `kill-${i}`, amount: 10 + i }).then((r) => r.taskId)));
    let completed = 0;
    let killed: Promise<void> | undefined;
    const ended = await Promise.all(
      ids.map((id) =>
        t.client.wait(id, { timeoutMs: 240_000 }).then((s) => {
          if (s.status === 'completed' && ++completed === 10) killed = t.schedulers[0]!.kill('SIGKILL');
          return s;
        }),
      ),
    );
    await killed;
    expect(killed).toBeDefined();
    expect(notCompleted(ended)).toEqual([]);
    expect(t.services.payment.stats().maxInFlight).toBeLessThanOrEqual(3);
    // A permit held for a dead scheduler's start lapses at its complete-by (5 s budget) + 1 s; three supervisor intervals more.
    await drained(t, 5_000 + 1_000 + 3 * 200 + 10_000);
  });
});
