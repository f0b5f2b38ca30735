/**
 * Scaling: the same batch of I/O-bound tasks (io10: a 10 ms await, 4 at a time per process) run by one
 * agent process, then by two; the ratio of their step rates shows whether agents scale out. The pair is
 * measured `repeats` times, alternating (1, 2, 1, 2 …), so a shared machine's load drifts over both.
 */
import type { Redis } from 'ioredis';
import type { TriadClient } from '@triad/client';
import { keys } from '@triad/store';
import type { Actors } from './actors.js';
import { runBatch } from './batch.js';
import type { Completions } from './completions.js';

export interface ScalingResult {
  tasks: number;
  steps: number;
  repeats: number;
  /** Mean over the repeats. */
  oneAgentStepsPerSec: number;
  twoAgentsStepsPerSec: number;
  ratio: number;
  /** Every measurement, in the order taken. */
  oneAgentRuns: number[];
  twoAgentsRuns: number[];
  /** Share of the steps the busier of the two processes ran, per 2-agent run (0.5 = even). */
  busierShare: number[];
}

/** Which agent instance ran each step (the step record's lockedBy): how evenly two processes shared the work. */
async function busierShare(redis: Redis, namespace: string, taskIds: readonly string[], steps: number): Promise<number> {
  const k = keys(namespace);
  const p = redis.pipeline();
  for (const id of taskIds) p.hmget(k.task(id), ...Array.from({ length: steps }, (_, i) => `s:s${i + 1}`));
  const counts = new Map<string, number>();
  let total = 0;
  for (const [err, v] of (await p.exec()) ?? []) {
    if (err || !Array.isArray(v)) continue;
    for (const raw of v as (string | null)[]) {
      const by = raw ? (JSON.parse(raw) as { lockedBy?: string }).lockedBy : undefined;
      if (!by) continue;
      counts.set(by, (counts.get(by) ?? 0) + 1);
      total++;
    }
  }
  return total > 0 ? Math.max(...counts.values()) / total : NaN;
}

export async function measureScaling(
  actors: Actors,
  client: TriadClient,
  completions: Completions,
  redis: Redis,
  workflow: string,
  tasks: number,
  steps: number,
  repeats: number,
): Promise<ScalingResult> {
  const shares: number[] = [];
  const rate = async (share: boolean): Promise<number> => {
    // A small unmeasured batch first, so a freshly started process is warm when the clock runs.
    await runBatch(client, completions, workflow, Math.min(40, tasks), steps);
    const r = await runBatch(client, completions, workflow, tasks, steps);
    if (share) shares.push(await busierShare(redis, client.namespace, r.taskIds, steps));
    return (tasks * steps) / (r.elapsedMs / 1000);
  };
  const one: number[] = [];
  const two: number[] = [];
  const first = await actors.agent(['io10']);
  try {
    for (let i = 0; i < repeats; i++) {
      one.push(await rate(false));
      const second = await actors.agent(['io10']);
      try {
        two.push(await rate(true));
      } finally {
        await second.stop();
      }
    }
  } finally {
    await first.stop();
  }
  const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / v.length;
  return {
    tasks,
    steps,
    repeats,
    oneAgentStepsPerSec: mean(one),
    twoAgentsStepsPerSec: mean(two),
    ratio: mean(two) / mean(one),
    oneAgentRuns: one,
    twoAgentsRuns: two,
    busierShare: shares,
  };
}
