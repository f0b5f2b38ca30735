// The Go agent's circuit breaker (examples/go/agent/breaker.go), like the TypeScript host's
// (circuit-breaker.test.ts): after consecutive failures of the fraud service it stops calling it and
// reports `circuitOpen`, so steps are parked without counting failures, and they complete once the
// service is healthy again. Invalid breaker settings stop the agent at start with the variable's name.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskEvent } from '@triad/protocol';
import { startNats, startProcess, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { buildGoExamples, type GoExamples } from '../support/go.js';
import { effectCounts, startTriad, ROOT } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let go: GoExamples;

beforeAll(async () => {
  // The Go packages are installed when missing (minutes on a fresh machine), then the examples built.
  [go, nats, redis] = await Promise.all([buildGoExamples(td), startNats({ teardown: td }), startRedis({ teardown: td })]);
}, 900_000);

/** Runs the Go agent until it exits; resolves with its exit code and output (never rejects). */
function goAgentExit(env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(go.agent, ['-agent', 'fraud'], { env: { ...process.env, NATS_URL: nats.url, ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output: stdout + stderr });
    });
  });
}

describe("the Go agent's circuit breaker", () => {
  it('parks steps while the breaker is open without counting failures; they complete after the service heals', async () => {
    // Every call the fraud service fails draws one number: the test counts the calls it refuses.
    let refusedCalls = 0;
    const t = await startTriad(td, { nats, redis }, {
      registerOrders: false,
      agentProcesses: 0,
      serviceRandom: (name) => () => {
        if (name === 'fraud') refusedCalls++;
        return Math.random();
      },
    });
    // One call per attempt and three failures end a step; the breaker opens after two. Open for 5 s:
    // long enough that the second task surely meets it open, even on a loaded machine.
    await t.client.registerWorkflow({
      name: 'screening',
      defaults: { retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 }, ladder: { retries: 3, longBackoffMs: 200, maxFailures: 3 } },
      steps: [{ name: 'fraud', agent: 'fraud', budgetMs: 2_000 }],
    });
    const agent = await startProcess({
      name: 'go-agent-breaker',
      command: go.agent,
      args: ['-agent', 'fraud'],
      env: { ...t.env, TRIAD_BREAKER_THRESHOLD: '2', TRIAD_BREAKER_HALF_OPEN_MS: '5000' },
      cwd: ROOT,
      readyPattern: /go agent ready/,
      teardown: td,
    });
    expect(agent.output()).toMatch(/circuit breaker: opens after 2 failures, half-opens after 5s/);
    t.services.fraud.setFaults({ failRate: 1 });

    const first = await t.client.submit('screening', { orderId: 'gcb-1', amount: 1 });
    const parked = await waitFor(
      async () => {
        for await (const e of t.client.watch(first.taskId, { signal: AbortSignal.timeout(300) })) {
          if (e.type === 'step_parked' && e.step === 'fraud' && /circuit breaker/.test(e.reason ?? '')) return e;
        }
        return undefined;
      },
      { timeoutMs: 20_000, what: 'the fraud step to be parked by the open breaker' },
    );
    expect(parked).toMatchObject({ type: 'step_parked' });
    expect(agent.output()).toMatch(/circuit opened/);
    // Two calls failed, then the breaker opened.
    expect(refusedCalls).toBe(2);

    // While the breaker is open a new task's step is parked at once: the service is not called and
    // the step's failure budget is untouched.
    const second = await t.client.submit('screening', { orderId: 'gcb-2', amount: 2 });
    const secondEvents: TaskEvent[] = [];
    await waitFor(async () => (await t.client.getTask(second.taskId)).steps[0]!.status === 'parked' || undefined, {
      timeoutMs: 10_000,
      what: "the second task's fraud step to be parked",
    });
    expect((await t.client.getTask(second.taskId)).steps[0]!.failureCount).toBe(0);
    expect(refusedCalls).toBe(2);

    t.services.fraud.setFaults({ failRate: 0 });
    const [a, b] = await Promise.all([
      t.client.wait(first.taskId, { timeoutMs: 30_000 }),
      t.client.wait(second.taskId, { timeoutMs: 30_000, onEvent: (e) => secondEvents.push(e) }),
    ]);
    expect(a.status).toBe('completed');
    expect(b.status).toBe('completed');
    // The first task failed twice before the breaker opened — below its budget of three.
    expect(a.steps[0]!.failureCount).toBe(2);
    expect(b.steps[0]!.failureCount).toBe(0);
    expect(secondEvents.some((e) => e.type === 'step_parked' && /circuit breaker/.test(e.reason ?? ''))).toBe(true);
    // The trial call after the breaker half-opened succeeded and closed it; the effects applied once.
    expect(agent.output()).toMatch(/circuit closed/);
    const counts = effectCounts(t.services.fraud);
    expect(counts.get(`${t.namespace}/${first.taskId}/fraud`)).toBe(1);
    expect(counts.get(`${t.namespace}/${second.taskId}/fraud`)).toBe(1);
  });

  it('stops at start when a breaker setting is not a whole number >= 1, naming the variable', async () => {
    for (const [name, value] of [
      ['TRIAD_BREAKER_THRESHOLD', '0'],
      ['TRIAD_BREAKER_THRESHOLD', 'two'],
      ['TRIAD_BREAKER_HALF_OPEN_MS', '1.5'],
      ['TRIAD_BREAKER_HALF_OPEN_MS', '-5000'],
    ] as const) {
      const r = await goAgentExit({ [name]: value });
      expect(r.code, r.output).toBe(2);
      expect(r.output).toContain(`cannot start: ${name} must be a whole number from 1 to 2147483647 (got "${value}")`);
    }
  });
});
