/**
 * Keeps `npm run bench` from rotting: a tiny run (its own servers, real actor processes) must print a
 * last JSON line with every headline figure as a positive number. Timings are never asserted.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const BENCH = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const KEYS = ['steps_per_sec', 'tasks_per_sec', 'latency_p50_ms', 'latency_p99_ms', 'latency_max_ms', 'baseline_roundtrips_per_sec', 'ratio_to_baseline'];

function runBench(args: string[], timeoutMs = 150_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BENCH, ...args], { timeout: timeoutMs, maxBuffer: 10_000_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('npm run bench', () => {
  // With the peers: BullMQ on the run's Redis, Restate (installed into .triad/peers on first use, ~30 s).
  it('prints the peer table and the headline figures as one JSON object on its last line', { timeout: 420_000 }, async () => {
    const r = await runBench(['--tasks', '20', '--steps', '3', '--mode', 'throughput', '--latency-tasks', '10', '--warmup', '2', '--peers', 'bullmq,restate-nofsync', '--json'], 400_000);
    expect(r.code, `bench failed:\n${r.stderr}\n${r.stdout}`).toBe(0);
    const last = r.stdout.trim().split('\n').at(-1) ?? '';
    const json = JSON.parse(last) as Record<string, unknown>;
    for (const k of [...KEYS, 'ratio_to_bullmq', 'latency_ratio_to_bullmq', 'latency_p99_ratio_to_bullmq', 'ratio_to_restate_nofsync']) {
      expect(typeof json[k], `${k} in ${last}`).toBe('number');
      expect(json[k] as number, k).toBeGreaterThan(0);
    }
    const peers = json['peers'] as Record<string, Record<string, unknown>>;
    expect(Object.keys(peers).sort()).toEqual(['bullmq', 'restate-nofsync']);
    for (const [name, p] of Object.entries(peers)) {
      for (const k of ['steps_per_sec', 'latency_p50_ms', 'latency_p99_ms']) expect(p[k] as number, `${name}.${k}`).toBeGreaterThan(0);
      expect(typeof p['cpu_ms_per_step'], `${name}.cpu_ms_per_step`).toBe('number');
      expect(p['resent_calls'], `${name}.resent_calls`).toEqual(expect.any(Number));
    }
    // The peer table comes first: Triad, then each peer with Triad's steps/s over its own.
    const table = r.stdout.slice(0, r.stdout.indexOf('| metric'));
    expect(table).toMatch(/^\| system +\| steps\/s +\| p50 ms/m);
    expect(table).toMatch(/^\| Triad \(20 tasks × 3 steps/m);
    expect(table).toMatch(/^\| BullMQ \d+\.\d+\.\d+ flows/m);
    expect(table).toMatch(/^\| Restate \d+\.\d+\.\d+ \(SDK \d+\.\d+\.\d+\), 3 durable calls per task, fsync off/m);
    // CPU per unit of work (from /proc): counted in 10 ms ticks, so a run this small may read 0.
    for (const k of ['cpu_ms_per_step', 'baseline_cpu_ms_per_roundtrip']) {
      expect(typeof json[k], `${k} in ${last}`).toBe('number');
      expect(json[k] as number, k).toBeGreaterThanOrEqual(0);
    }
  });

  // --durable: Redis appendfsync always, JetStream on the 3-node R3 cluster (nats-server < 2.10) or syncing every write.
  it('runs --durable on durable servers and reports them, CPU per step by process and the step leg\'s floors', { timeout: 240_000 }, async () => {
    const r = await runBench(['--durable', '--tasks', '20', '--steps', '3', '--mode', 'throughput', '--latency-tasks', '10', '--warmup', '2', '--peers', 'bullmq', '--json'], 220_000);
    expect(r.code, `bench failed:\n${r.stderr}\n${r.stdout}`).toBe(0);
    const json = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    expect(json['config']).toMatchObject({ durable: true });
    const d = json['durability'] as { nats: string; redis: string; stream_replicas: number };
    expect(d.redis).toMatch(/appendfsync always/);
    expect(d.nats).toMatch(/sync_interval: always|3-node cluster, streams R3/);
    expect([1, 3]).toContain(d.stream_replicas);
    for (const k of ['floor_stored_hop_p50_ms', 'floor_redis_rtt_p50_ms', 'floor_step_leg_p50_ms', 'latency_step_leg_p50_ms', 'step_leg_over_floor']) expect(json[k] as number, k).toBeGreaterThan(0);
    const byProcess = json['cpu_ms_per_step_by_process'] as Record<string, number>;
    expect(Object.keys(byProcess)).toEqual(expect.arrayContaining(['scheduler', 'supervisor', 'agents', 'nats-server', 'redis-server', 'bench client']));
    const bull = (json['peers'] as Record<string, Record<string, unknown>>)['bullmq'];
    expect(Object.keys(bull?.['cpu_ms_per_step_by_process'] as object)).toEqual(['bullmq worker', 'redis-server', 'bench client']);
    expect(r.stdout).toMatch(/^Durable run \(--durable\): NATS /m);
    expect(r.stdout).toMatch(/^CPU ms per step, by process/m);
    expect(r.stdout).toMatch(/step leg p50 beside its floors/);
  });

  it('refuses an unknown peer with the list of known ones', async () => {
    const r = await runBench(['--peers', 'temporal']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unknown peer "temporal" \(known: all, bullmq, restate, restate-nofsync, restate-fsync\)/);
  });

  it('measures a finished task before and after the supervisor compacts it', { timeout: 180_000 }, async () => {
    const r = await runBench(['--mode', 'memory', '--memory-tasks', '50', '--json']);
    expect(r.code, `bench failed:\n${r.stderr}\n${r.stdout}`).toBe(0);
    const json = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    for (const k of ['memory_bytes_per_task', 'memory_key_bytes_per_task', 'memory_bytes_per_task_uncompacted', 'memory_key_bytes_per_task_uncompacted']) {
      expect(typeof json[k], k).toBe('number');
    }
    // MEMORY USAGE is exact per record (used_memory over 50 tasks is too noisy to compare).
    expect(json['memory_key_bytes_per_task'] as number).toBeLessThan(json['memory_key_bytes_per_task_uncompacted'] as number);
    expect(r.stdout).toMatch(/record after compaction \(listpack/);
  });
});
