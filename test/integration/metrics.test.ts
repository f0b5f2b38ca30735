/**
 * The HTTP surface of every actor process (decision 0013): with TRIAD_HTTP_PORT set, the scheduler,
 * the supervisor and the order agents serve /metrics, /healthz and /readyz. A few orders move the
 * triad_* metrics each one owns; /readyz answers 503 with the reason while NATS is down (a harness
 * nats-server this test stops), and 200 again once it is back.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, startRedis, waitFor, withTeardown, type ActorProcess, type NatsServer, type RedisServer } from '../harness/index.js';
import { ROOT, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  // Port 0: each process takes a free port and says which (its log line).
  t = await startTriad(td, { nats, redis }, { env: { TRIAD_HTTP_PORT: '0', TRIAD_HTTP_HOST: '127.0.0.1' } });
}, 60_000);

function httpPort(p: ActorProcess): number {
  const m = /serving \/metrics, \/healthz and \/readyz on port (\d+)/.exec(p.output());
  if (!m) throw new Error(`${p.name} did not say which port it serves on:\n${p.output().slice(-2_000)}`);
  return Number(m[1]);
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format → samples (enough of it for these checks: no escapes beyond \" in label values). */
function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

async function scrape(p: ActorProcess): Promise<Sample[]> {
  const res = await fetch(`http://127.0.0.1:${httpPort(p)}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  return parse(await res.text());
}

/** The sum of a metric's samples whose labels include `labels`. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

function has(samples: Sample[], name: string, labels: Record<string, string> = {}): boolean {
  return samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

describe('metrics and health over HTTP', () => {
  it('every actor serves /healthz and /readyz (200, with its checks)', async () => {
    for (const p of [t.schedulers[0]!, t.supervisors[0]!, t.agents[0]!]) {
      const health = await fetch(`http://127.0.0.1:${httpPort(p)}/healthz`);
      expect(health.status, `${p.name} /healthz`).toBe(200);
      const ready = await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${httpPort(p)}/readyz`);
          return r.status === 200 ? ((await r.json()) as { ready: boolean; checks: Record<string, boolean> }) : undefined;
        },
        { timeoutMs: 15_000, what: `${p.name} /readyz to answer 200` },
      );
      expect(ready.ready).toBe(true);
      expect(ready.checks['nats'], `${p.name} checks NATS`).toBe(true);
    }
  }, 30_000);

  it('a few orders move the scheduler, agent and supervisor metrics', async () => {
    const ns = { namespace: t.namespace };
    const orders = ['m1', 'm2', 'm3'];
    const states = await Promise.all(orders.map((orderId, i) => t.client.run('orders', { orderId, amount: 10 + i }, { timeoutMs: 30_000 })));
    expect(states.map((s) => s.status)).toEqual(['completed', 'completed', 'completed']);

    const scheduler = await waitFor(
      async () => {
        const s = await scrape(t.schedulers[0]!);
        // Task ends are counted once the record's createdAt is read; consumer gauges after the first poll (5 s).
        return total(s, 'triad_tasks_ended_total', { ...ns, workflow: 'orders', status: 'completed' }) >= 3 && has(s, 'triad_nats_consumer_pending', { ...ns, consumer: 'scheduler' }) ? s : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 250, what: 'the scheduler to count 3 completed orders and poll its consumers' },
    );
    expect(total(scheduler, 'triad_tasks_submitted_total', { ...ns, workflow: 'orders' })).toBe(3);
    expect(total(scheduler, 'triad_task_duration_seconds_count', { ...ns, workflow: 'orders', status: 'completed' })).toBe(3);
    expect(total(scheduler, 'triad_results_total', { ...ns, result: 'applied' })).toBeGreaterThanOrEqual(12); // 4 steps × 3 orders
    expect(total(scheduler, 'triad_redis_script_duration_seconds_count', { ...ns, script: 'createTask' })).toBe(3);
    expect(total(scheduler, 'triad_redis_script_duration_seconds_count', { ...ns, script: 'applyResult' })).toBeGreaterThanOrEqual(12);
    expect(has(scheduler, 'triad_nats_consumer_redelivered', { ...ns, consumer: 'results' })).toBe(true);
    expect(has(scheduler, 'triad_process_cpu_user_seconds_total'), 'process metrics, prefixed').toBe(true);

    const agents = await scrape(t.agents[0]!);
    for (const agent of ['inventory', 'fraud', 'payment', 'shipping']) {
      expect(total(agents, 'triad_steps_started_total', { ...ns, agent }), `${agent} started`).toBe(3);
      expect(total(agents, 'triad_steps_ended_total', { ...ns, agent, outcome: 'ok' }), `${agent} ended ok`).toBe(3);
      expect(total(agents, 'triad_step_duration_seconds_count', { ...ns, agent, outcome: 'ok' }), `${agent} durations`).toBe(3);
      expect(total(agents, 'triad_steps_in_flight', { ...ns, agent }), `${agent} in flight`).toBe(0);
    }

    const supervisor = await scrape(t.supervisors[0]!);
    expect(total(supervisor, 'triad_supervisor_sweeps_total', ns)).toBeGreaterThan(0);
    expect(total(supervisor, 'triad_supervisor_leading', ns)).toBe(1);
    expect(total(supervisor, 'triad_supervisor_epoch', ns)).toBeGreaterThanOrEqual(1);
    expect(total(supervisor, 'triad_supervisor_leadership_changes_total', ns)).toBeGreaterThanOrEqual(1);
    expect(has(supervisor, 'triad_supervisor_sweep_lag_seconds', ns)).toBe(true);
  }, 60_000);

  it('every metric the Grafana dashboard (deploy/grafana/triad.json) queries is one the actors serve', async () => {
    const dashboard = readFileSync(join(ROOT, 'deploy/grafana/triad.json'), 'utf8');
    const queried = new Set([...dashboard.matchAll(/\b(triad_[a-z0-9_]*[a-z0-9])\b/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, '')));
    expect(queried.size, 'the dashboard queries triad_* metrics').toBeGreaterThan(15);
    const served = new Set<string>();
    for (const p of [t.schedulers[0]!, t.supervisors[0]!, t.agents[0]!]) {
      const text = await (await fetch(`http://127.0.0.1:${httpPort(p)}/metrics`)).text();
      for (const m of text.matchAll(/^# TYPE (\S+) /gm)) served.add(m[1]!);
    }
    expect([...queried].filter((name) => !served.has(name)), 'queried by the dashboard but served by no actor').toEqual([]);
  }, 30_000);

  it('/readyz answers 503 naming NATS while NATS is down, and 200 once it is back', async () => {
    const url = `http://127.0.0.1:${httpPort(t.schedulers[0]!)}/readyz`;
    await nats.kill();
    const down = await waitFor(
      async () => {
        const r = await fetch(url);
        return r.status === 503 ? ((await r.json()) as { ready: boolean; reason: string; checks: Record<string, boolean> }) : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 100, what: 'the scheduler /readyz to answer 503 with NATS stopped' },
    );
    expect(down.ready).toBe(false);
    expect(down.reason).toMatch(/nats/);
    expect(down.checks).toEqual({ nats: false, redis: true });
    // Alive all the same: only readiness depends on the connections.
    expect((await fetch(`http://127.0.0.1:${httpPort(t.schedulers[0]!)}/healthz`)).status).toBe(200);
    await nats.restart();
    await waitFor(async () => (await fetch(url)).status === 200, { timeoutMs: 20_000, intervalMs: 200, what: 'the scheduler /readyz to answer 200 after NATS restarted' });
  }, 60_000);
});
