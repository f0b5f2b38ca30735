/**
 * Recovery: an agent process is SIGKILLed while it runs a step (the `stall` agent hangs on its first
 * attempt); the time from the kill until the step completes on its retry, taken by another agent
 * process, is compared with the bound complete-by budget + supervisor interval.
 */
import { performance } from 'node:perf_hooks';
import type { TriadClient } from '@triad/client';
import type { StartedProcess } from '@triad/launcher';
import type { Actors } from './actors.js';
import { Completions } from './completions.js';
import { withTimeout } from './timing.js';

export interface RecoveryOptions {
  samples: number;
  budgetMs: number;
  intervalMs: number;
  leaseMs: number;
}

export interface RecoveryResult extends RecoveryOptions {
  /** Kill → the step's `completed`, per sample, ms. */
  killToDoneMs: number[];
  /** Kill → the supervisor's retry decision (`step_retried` event), per sample, ms. */
  killToRetryMs: number[];
  maxMs: number;
  /** budget + supervisor interval: the bound while the supervisor leader lives. */
  boundMs: number;
}

export async function measureRecovery(actors: Actors, client: TriadClient, workflow: string, o: RecoveryOptions): Promise<RecoveryResult> {
  const retriedAt = new Map<string, number>();
  const completions = new Completions(client, (ev, at) => {
    if (ev.type === 'step_retried') retriedAt.set(ev.taskId, at);
  });
  const killToDoneMs: number[] = [];
  const killToRetryMs: number[] = [];
  // Two processes serve the stall agent; whichever takes the step is killed the moment it starts it, and
  // the other takes the retry. The replacement is started after the sample, outside the measurement.
  const pool: StartedProcess[] = await actors.agents(['stall'], 2);
  /**
   * A few tasks that do not stall, one at a time, so both processes have run the step path before the
   * clock runs (a process' first step pays for its cold code, which is not what recovery measures).
   */
  const warm = async (label: string): Promise<void> => {
    for (let w = 0; w < 8; w++) {
      const id = `rec-warm-${process.pid}-${label}-${w}`;
      const done = completions.completion(id);
      await client.submit(workflow, { stall: false }, { taskId: id, replyTo: completions.subject });
      await withTimeout(done, 15_000, `recovery warm-up task ${id}`);
    }
  };
  try {
    await warm('start');
    for (let i = 0; i < o.samples; i++) {
      const taskId = `rec-${process.pid}-${Date.now().toString(36)}-${i}`;
      const done = completions.completion(taskId);
      await client.submit(workflow, { stall: true }, { taskId, replyTo: completions.subject });
      const started = new RegExp(`bench-stall-started ${taskId}`);
      const holder = await Promise.any(pool.map((c) => c.waitForOutput(started, 15_000).then(() => c))).catch(() => {
        throw new Error(`recovery sample ${i + 1}: neither stall agent started task ${taskId} within 15 s; last output:\n${pool.map((c) => `${c.name}:\n${c.tail(1_000)}`).join('\n')}`);
      });
      const killedAt = performance.now();
      await holder.kill();
      const at = await withTimeout(done, o.budgetMs + o.intervalMs + o.leaseMs + 15_000, `recovery sample ${i + 1}: task ${taskId} after its agent was killed`);
      killToDoneMs.push(at - killedAt);
      const r = retriedAt.get(taskId);
      if (r !== undefined) killToRetryMs.push(r - killedAt);
      pool.splice(pool.indexOf(holder), 1, await actors.agent(['stall']));
      await warm(String(i));
    }
  } finally {
    await Promise.all(pool.map((c) => c.stop()));
    await completions.close();
  }
  return { ...o, killToDoneMs, killToRetryMs, maxMs: Math.max(...killToDoneMs), boundMs: o.budgetMs + o.intervalMs };
}
