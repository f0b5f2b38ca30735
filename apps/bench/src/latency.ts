/**
 * Latency at low load: tasks submitted one at a time, submit → `completed` event received; split into
 * legs by when each event reached the client: the submission leg (submit → `received`) and one leg per
 * step (previous event → this step's `step_done`: step request, agent, result, transition).
 */
import { performance } from 'node:perf_hooks';
import type { TriadClient } from '@triad/client';
import { Completions } from './completions.js';
import { percentile, withTimeout } from './timing.js';

export interface LatencyResult {
  samples: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
  /** submit → the `received` event at the client. */
  submitLegP50Ms: number;
  /** previous event → `step_done`, every step of every sample. */
  stepLegP50Ms: number;
  stepLegP99Ms: number;
}

/** Far above any healthy latency; a task slower than this is a failure, not a sample. */
const TASK_TIMEOUT_MS = 30_000;

export async function measureLatency(client: TriadClient, workflow: string, samples: number, warmup: number): Promise<LatencyResult> {
  const arrivals = new Map<string, number[]>();
  const completions = new Completions(client, (ev, at) => {
    if (ev.type === 'received' || ev.type === 'step_done') arrivals.get(ev.taskId)?.push(at);
  });
  const latencies: number[] = [];
  const submitLegs: number[] = [];
  const stepLegs: number[] = [];
  try {
    for (let i = 0; i < warmup + samples; i++) {
      const taskId = `lat-${process.pid}-${Date.now().toString(36)}-${i}`;
      const done = completions.completion(taskId);
      const seen: number[] = [];
      arrivals.set(taskId, seen);
      const t0 = performance.now();
      await client.submit(workflow, {}, { taskId, replyTo: completions.subject });
      const at = await withTimeout(done, TASK_TIMEOUT_MS, `latency task ${taskId}`);
      arrivals.delete(taskId);
      if (i < warmup) continue;
      latencies.push(at - t0);
      const [received, ...stepsDone] = seen;
      if (received === undefined) continue;
      submitLegs.push(received - t0);
      let prev = received;
      for (const t of stepsDone) {
        stepLegs.push(t - prev);
        prev = t;
      }
    }
  } finally {
    await completions.close();
  }
  return {
    samples,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: Math.max(...latencies),
    meanMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    submitLegP50Ms: percentile(submitLegs, 50),
    stepLegP50Ms: percentile(stepLegs, 50),
    stepLegP99Ms: percentile(stepLegs, 99),
  };
}
