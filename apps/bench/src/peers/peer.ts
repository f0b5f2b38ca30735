/**
 * The tools a user would pick instead of Triad, measured in the same run, on the same machine and —
 * where they use one — the same private servers: N tasks of S sequential no-op steps at once (steps/s),
 * then tasks one at a time (latency, submit → the submitter learns the task is done), as Triad is measured.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { cpuPerUnit, cpuWindow, type CpuShare, type ProcessRef } from '../cpu.js';
import { percentile, withTimeout } from '../timing.js';

export const PEERS = ['bullmq', 'restate', 'restate-nofsync'] as const;
export type PeerName = (typeof PEERS)[number];

export interface PeerRunOptions {
  /** Tasks submitted at once for throughput (Triad's --tasks). */
  tasks: number;
  /** Sequential no-op steps per task (Triad's --steps; latency tasks have 3, as Triad's). */
  steps: number;
  latencyTasks: number;
  warmup: number;
  /** Jobs or calls in flight per worker process: Triad's agent concurrency × agent processes. */
  concurrency: number;
  /** The run's private Redis (BullMQ) and a scratch directory (Restate's data). */
  redisUrl: string;
  namespace: string;
  tmpDir: string;
  progress: (msg: string) => void;
}

export interface PeerResult {
  name: PeerName;
  /** What was run, for the table: the tool, its version and its settings. */
  label: string;
  tasks: number;
  steps: number;
  elapsedMs: number;
  stepsPerSec: number;
  latencySamples: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  cpu: CpuShare[];
  cpuMsPerStep: number;
  /** Calls sent again during the measurements (0 for peers that never re-send). */
  resentCalls: number;
}

/** One peer's running system: it runs a task to its end, and stops everything it started. */
export interface PeerSystem {
  label: string;
  /** The processes doing the work (servers and workers), for CPU accounting; the bench client is added. */
  processes: ProcessRef[];
  /** Resolves when the task has ended, as its submitter learns it. */
  runTask(id: string, steps: number): Promise<void>;
  /** At most this many tasks in flight at once during the throughput run (HTTP peers hold a connection per call). */
  maxInFlight?: number;
  /** Calls sent again so far after a failed connection or no answer in time (HTTP peers); a figure with any is suspect. */
  resent?: () => number;
  stop(): Promise<void>;
}

const TASK_TIMEOUT_MS = 30_000;
const BATCH_TIMEOUT_MS = 600_000;

/** Runs `count` tasks, at most `inFlight` at a time (all at once when unbounded). */
async function runMany(sys: PeerSystem, prefix: string, count: number, steps: number): Promise<void> {
  const limit = Math.min(count, sys.maxInFlight ?? count);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      await sys.runTask(`${prefix}-${i}`, steps);
    }
  };
  await withTimeout(Promise.all(Array.from({ length: limit }, lane)), BATCH_TIMEOUT_MS, `${sys.label}: ${count} tasks`);
}

export async function measurePeer(name: PeerName, sys: PeerSystem, o: PeerRunOptions): Promise<PeerResult> {
  const resentBefore = sys.resent?.() ?? 0;
  o.progress(`${name}: warm-up, then ${o.tasks} tasks × ${o.steps} steps at once`);
  await runMany(sys, 'warm', Math.min(200, Math.ceil(o.tasks / 10)), o.steps);
  const cpu = cpuWindow(sys.processes);
  const t0 = performance.now();
  await runMany(sys, 'tp', o.tasks, o.steps);
  const elapsedMs = performance.now() - t0;
  const shares = cpu.end(elapsedMs);

  o.progress(`${name}: latency, ${o.warmup} warm-up + ${o.latencyTasks} 3-step tasks one at a time`);
  const latencies: number[] = [];
  for (let i = 0; i < o.warmup + o.latencyTasks; i++) {
    const s = performance.now();
    await withTimeout(sys.runTask(`lat-${i}`, 3), TASK_TIMEOUT_MS, `${sys.label}: latency task ${i}`);
    if (i >= o.warmup) latencies.push(performance.now() - s);
  }
  const stepsDone = o.tasks * o.steps;
  return {
    name,
    label: sys.label,
    tasks: o.tasks,
    steps: o.steps,
    elapsedMs,
    stepsPerSec: stepsDone / (elapsedMs / 1000),
    latencySamples: latencies.length,
    latencyP50Ms: percentile(latencies, 50),
    latencyP99Ms: percentile(latencies, 99),
    cpu: shares,
    cpuMsPerStep: cpuPerUnit(shares, stepsDone),
    resentCalls: (sys.resent?.() ?? 0) - resentBefore,
  };
}

/** The installed version of a package, read from its package.json (found above its entry point: not every package exports it). */
export function packageVersion(name: string): string {
  let dir = dirname(createRequire(import.meta.url).resolve(name));
  for (let i = 0; i < 8; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === name && pkg.version) return pkg.version;
    } catch {
      // no package.json here: keep walking up
    }
    dir = dirname(dir);
  }
  return '?';
}
