/**
 * The bench's own logic, without running it: option parsing, the durable servers' choice, the CPU split
 * by process, the step leg's floor, and the shape of the report (targets, JSON keys). No timings.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cpuPerUnitByRole, processRole, type CpuShare } from '../src/cpu.js';
import { stepLegFloor } from '../src/floors.js';
import { parseOptions } from '../src/options.js';
import { durabilityLine, jsonSummary, peerTable, rows, type Results } from '../src/report.js';
import { parseNatsVersion, supportsSyncAlways, syncAlwaysConfig } from '../src/servers.js';

const argv = (...a: string[]): string[] => ['node', 'bench', ...a];

describe('--durable options', () => {
  it('defaults the peers to BullMQ and Restate with fsync, and keeps peers named', () => {
    expect(parseOptions(argv('--durable')).peers).toEqual(['bullmq', 'restate']);
    expect(parseOptions(argv('--durable', '--peers', 'bullmq')).peers).toEqual(['bullmq']);
    expect(parseOptions(argv('--durable')).durable).toBe(true);
    expect(parseOptions(argv()).durable).toBe(false);
    expect(parseOptions(argv()).peers).toEqual([]);
  });

  const BENCH = fileURLToPath(new URL('../dist/main.js', import.meta.url));
  const run = (args: string[]): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => execFile(process.execPath, [BENCH, ...args], { timeout: 30_000 }, (err, _out, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr })));

  it('refuses --use-env and a peer without fsync, saying what to do', async () => {
    const env = await run(['--durable', '--use-env']);
    expect(env.code).toBe(1);
    expect(env.stderr).toMatch(/--durable starts servers whose fsync it sets: run it without --use-env/);
    const nofsync = await run(['--durable', '--peers', 'bullmq,restate-nofsync']);
    expect(nofsync.code).toBe(1);
    expect(nofsync.stderr).toMatch(/restate-nofsync turns fsync off; name restate instead/);
  });
});

describe('durable NATS', () => {
  it('reads the version nats-server prints and knows when sync_interval: always exists', () => {
    expect(parseNatsVersion('nats-server: v2.9.10\n')).toEqual([2, 9, 10]);
    expect(parseNatsVersion('nats-server: v2.10.0')).toEqual([2, 10, 0]);
    expect(parseNatsVersion('command not found')).toBeUndefined();
    expect(supportsSyncAlways([2, 9, 10])).toBe(false);
    expect(supportsSyncAlways([2, 10, 0])).toBe(true);
    expect(supportsSyncAlways([3, 0, 1])).toBe(true);
    expect(supportsSyncAlways(undefined)).toBe(false);
  });

  it('writes a configuration that syncs every write, its store directory quoted', () => {
    const c = syncAlwaysConfig('/tmp/a dir/nats');
    expect(c).toMatch(/jetstream \{/);
    expect(c).toMatch(/sync_interval: always/);
    expect(c).toContain('store_dir: "/tmp/a dir/nats"');
  });
});

describe('CPU by process', () => {
  it('names each process by its role: numbered actors, cluster nodes and peers', () => {
    expect(['scheduler-1', 'supervisor-2', 'agent-noop-3', 'agent-noop+io10-4', 'nats-server', 'nats-d-0', 'nats-c-2', 'redis-server', 'redis-c7001', 'bullmq worker', 'bench client'].map(processRole)).toEqual([
      'scheduler', 'supervisor', 'agents', 'agents', 'nats-server', 'nats-server', 'nats-server', 'redis-server', 'redis-server', 'bullmq worker', 'bench client',
    ]);
  });

  it('sums the processes of one role per unit of work', () => {
    const shares: CpuShare[] = [
      { name: 'nats-d-0', cpuMs: 100, pctOfCore: 0 },
      { name: 'nats-d-1', cpuMs: 50, pctOfCore: 0 },
      { name: 'agent-noop-3', cpuMs: 30, pctOfCore: 0 },
      { name: 'agent-noop-4', cpuMs: 20, pctOfCore: 0 },
      { name: 'scheduler-1', cpuMs: 200, pctOfCore: 0 },
    ];
    expect(cpuPerUnitByRole(shares, 100)).toEqual({ 'nats-server': 1.5, agents: 0.5, scheduler: 2 });
  });
});

describe('the step leg floor', () => {
  it('is two stored hops and one Redis round trip', () => {
    expect(stepLegFloor(0.2, 0.1)).toBeCloseTo(0.5);
  });
});

describe('the report', () => {
  const cpu = (names: Record<string, number>): CpuShare[] => Object.entries(names).map(([name, cpuMs]) => ({ name, cpuMs, pctOfCore: 0 }));
  const results = (durable: boolean): Results => ({
    config: { tasks: 10, steps: 3, agents: 1, mode: 'throughput', namespace: 'x' },
    throughput: { tasks: 10, steps: 3, elapsedMs: 30, submitMs: 1, stepsPerSec: 1000, tasksPerSec: 333, work: { steps: 30, redisPerStep: {}, redisTotalPerStep: 28 }, cpu: cpu({ 'scheduler-1': 6, 'agent-noop-3': 3, 'nats-server': 3, 'bench client': 3 }) },
    latency: { samples: 5, p50Ms: 6, p99Ms: 9, maxMs: 10, meanMs: 6, submitLegP50Ms: 1, stepLegP50Ms: 1.5, stepLegP99Ms: 3 },
    floors: { samples: 5, storedHopP50Ms: 0.2, storedHopP99Ms: 0.4, redisRoundTripP50Ms: 0.1, redisRoundTripP99Ms: 0.3, stepLegFloorP50Ms: 0.5 },
    peers: [
      { name: 'bullmq', label: 'BullMQ', tasks: 10, steps: 3, elapsedMs: 30, stepsPerSec: 900, latencySamples: 5, latencyP50Ms: 3, latencyP99Ms: 10, cpu: cpu({ 'bullmq worker': 3, 'redis-server': 3 }), cpuMsPerStep: 0.2, resentCalls: 0 },
      { name: 'restate', label: 'Restate', tasks: 10, steps: 3, elapsedMs: 30, stepsPerSec: 150, latencySamples: 5, latencyP50Ms: 20, latencyP99Ms: 30, cpu: cpu({ 'restate-server': 30 }), cpuMsPerStep: 1, resentCalls: 0 },
    ],
    ...(durable ? { durability: { nats: 'R3', redis: 'always', streamReplicas: 3, actorEnv: { TRIAD_STREAM_REPLICAS: '3' } } } : {}),
  });
  const target = (r: Results, metric: RegExp): string => {
    const row = rows(r).find((x) => metric.test(x.metric));
    return `${row?.target ?? 'missing'} ${row?.met ?? ''}`.trim();
  };

  it('checks issue #26 targets: 1.2 × BullMQ, p50 1.5 ×, p99 1 × — with --durable 1.0 × BullMQ and 5 × Restate', () => {
    const plain = results(false);
    expect(target(plain, /Triad steps\/s ÷ BullMQ/)).toBe('≥ 1.2 NO');
    expect(target(plain, /latency p50 ratio/)).toBe('≤ 1.5 NO');
    expect(target(plain, /latency p99 ratio/)).toBe('≤ 1.0 yes');
    expect(target(plain, /÷ Restate/)).toBe('');
    const durable = results(true);
    expect(target(durable, /Triad steps\/s ÷ BullMQ/)).toBe('≥ 1.0 yes');
    expect(target(durable, /÷ Restate/)).toBe('≥ 5 yes');
    expect(target(durable, /latency p50 ratio/)).toBe('');
  });

  it('prints the step leg beside its floors, and CPU per step by process for every system', () => {
    const r = results(true);
    expect(rows(r).find((x) => /step leg p50 beside its floors/.test(x.metric))?.value).toBe('1.50 / 2 × 0.200 + 0.100 = 0.50');
    const t = peerTable(r) ?? '';
    expect(t).toMatch(/^Durable run \(--durable\): NATS R3; Redis always\./);
    expect(t).toContain('Triad: total 0.500 — scheduler 0.200, agents 0.100, nats-server 0.100, bench client 0.100');
    expect(t).toContain('bullmq: total 0.200 — bullmq worker 0.100, redis-server 0.100');
    expect(durabilityLine(results(false))).toBeUndefined();
    expect(durabilityLine(r)).toBe('Durable run (--durable): NATS R3; Redis always.');
  });

  it('puts the same figures in the JSON line', () => {
    const j = jsonSummary(results(true));
    expect(j['config']).toMatchObject({ durable: true });
    expect(j['durability']).toEqual({ nats: 'R3', redis: 'always', stream_replicas: 3 });
    expect(j['cpu_ms_per_step_by_process']).toEqual({ scheduler: 0.2, agents: 0.1, 'nats-server': 0.1, 'bench client': 0.1 });
    expect((j['peers'] as Record<string, Record<string, unknown>>)['bullmq']?.['cpu_ms_per_step_by_process']).toEqual({ 'bullmq worker': 0.1, 'redis-server': 0.1 });
    expect(j).toMatchObject({ floor_stored_hop_p50_ms: 0.2, floor_redis_rtt_p50_ms: 0.1, floor_step_leg_p50_ms: 0.5, step_leg_over_floor: 3, latency_step_leg_p50_ms: 1.5, ratio_to_restate: expect.closeTo(6.667, 3) });
    expect(jsonSummary(results(false))['config']).toMatchObject({ durable: false });
    expect(jsonSummary(results(false))['durability']).toBeUndefined();
  });
});
