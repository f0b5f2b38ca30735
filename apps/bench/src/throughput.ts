/** Throughput: N tasks of S sequential no-op steps submitted at once; steps/s and tasks/s end to end. */
import type { TriadClient } from '@triad/client';
import { runBatch } from './batch.js';
import type { Completions } from './completions.js';
import { perStep, type Counters, type CountersPerStep } from './counters.js';
import { cpuWindow, type CpuShare, type ProcessRef } from './cpu.js';

export interface ThroughputResult {
  tasks: number;
  steps: number;
  elapsedMs: number;
  submitMs: number;
  tasksPerSec: number;
  stepsPerSec: number;
  /** Redis commands and NATS messages per step during the measurement. */
  work: CountersPerStep;
  /** CPU use of each process during the measurement. */
  cpu: CpuShare[];
}

export async function measureThroughput(
  client: TriadClient,
  completions: Completions,
  workflow: string,
  tasks: number,
  steps: number,
  counters: () => Promise<Counters>,
  processes: readonly ProcessRef[],
  input: unknown = {},
): Promise<ThroughputResult> {
  const before = await counters();
  const cpu = cpuWindow(processes);
  const r = await runBatch(client, completions, workflow, tasks, steps, input);
  const shares = cpu.end(r.elapsedMs);
  const work = perStep(before, await counters(), tasks * steps);
  const secs = r.elapsedMs / 1000;
  return { tasks, steps, elapsedMs: r.elapsedMs, submitMs: r.submitMs, tasksPerSec: tasks / secs, stepsPerSec: (tasks * steps) / secs, work, cpu: shares };
}

/**
 * A payload of about `bytes` bytes encoded, shaped like business data (a list of records with a few
 * fields each) rather than one string: what decoding costs is per value, not per byte.
 */
export function benchPayload(bytes: number): { lines: { sku: string; qty: number; price: number; note: string }[] } {
  const lines: { sku: string; qty: number; price: number; note: string }[] = [];
  for (let i = 0; i * 40 < bytes; i++) lines.push({ sku: `sku-${i}`, qty: i % 7, price: i * 1.25, note: 'n' });
  return { lines };
}
