/**
 * How late a durable sleep ends (decision 0019 §1.9, issue #23: "within one supervisor interval of its
 * time"): tasks of one sleep step each, submitted a little apart so their wake times fall at different
 * points of the supervisor's sweep cycle; lateness = the step's recorded finish − its wake time (`until`),
 * both written by the transitions (no client clock). Measured, never asserted in `npm test`.
 */
import type { TriadClient } from '@triad/client';
import type { WorkflowDefinitionInput } from '@triad/protocol';

export interface SleepLatenessResult {
  samples: number;
  sleepMs: number;
  intervalMs: number;
  /** finishedAt − until per task, ms. */
  latenessMs: number[];
  maxMs: number;
}

export const sleepWorkflow = (ms: number): WorkflowDefinitionInput => ({ name: 'bench-sleep', steps: [{ name: 'nap', sleep: { ms } }] });

export async function measureSleepLateness(client: TriadClient, o: { samples: number; sleepMs: number; intervalMs: number }): Promise<SleepLatenessResult> {
  await client.registerWorkflow(sleepWorkflow(o.sleepMs));
  const ids: string[] = [];
  for (let i = 0; i < o.samples; i++) {
    ids.push((await client.submit('bench-sleep', {})).taskId);
    // Spread the wake times over the sweep cycle.
    await new Promise((r) => setTimeout(r, Math.max(1, Math.round(o.intervalMs / 3))));
  }
  const latenessMs: number[] = [];
  for (const id of ids) {
    const t = await client.wait(id, { timeoutMs: o.sleepMs + 30_000 });
    const nap = t.steps.find((s) => s.name === 'nap');
    if (t.status !== 'completed' || nap?.finishedAt === undefined || nap.startedAt === undefined) throw new Error(`sleep lateness: task ${id} ended ${t.status} without a recorded wake`);
    latenessMs.push(nap.finishedAt - (nap.startedAt + o.sleepMs));
  }
  return { ...o, latenessMs, maxMs: Math.max(...latenessMs) };
}
