/** Submits a batch of tasks at once and waits for all of them to complete, within a time limit. */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { TriadClient } from '@triad/client';
import { errorMessage } from '@triad/protocol';
import type { Completions } from './completions.js';

export interface BatchResult {
  tasks: number;
  taskIds: string[];
  /** From just before the first submit to the last `completed` event, ms. */
  elapsedMs: number;
  /** From just before the first submit until every submission was stored, ms. */
  submitMs: number;
}

/** A time limit for `tasks` × `steps` that no healthy run comes near, and that still ends a stuck one. */
export function batchTimeoutMs(tasks: number, steps: number): number {
  return 60_000 + tasks * steps * 20;
}

export async function runBatch(client: TriadClient, completions: Completions, workflow: string, tasks: number, steps: number, input: unknown = {}): Promise<BatchResult> {
  // UUIDs, as the client makes by default: id length shows in every key, index member and record.
  const ids = Array.from({ length: tasks }, () => randomUUID());
  const done = ids.map((id) => completions.completion(id));
  const t0 = performance.now();
  // All submissions in flight together, as an application enqueuing a burst would.
  await Promise.all(ids.map((taskId) => client.submit(workflow, input, { taskId, replyTo: completions.subject })));
  const submitted = performance.now();
  const limit = batchTimeoutMs(tasks, steps);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => void describeStuck(client, completions).then((why) => reject(new Error(`${workflow}: ${completions.pending().length} of ${tasks} tasks did not complete within ${limit} ms; ${why}`))), limit);
  });
  try {
    const times = await Promise.race([Promise.all(done), timeout]);
    return { tasks, taskIds: ids, elapsedMs: Math.max(...times) - t0, submitMs: submitted - t0 };
  } finally {
    clearTimeout(timer);
  }
}

/** The state of one task still awaited, to say why a batch is stuck. */
export async function describeStuck(client: TriadClient, completions: Completions): Promise<string> {
  const id = completions.pending()[0];
  if (id === undefined) return 'none pending';
  try {
    const t = await client.getTask(id);
    return `e.g. task ${id} is ${t.status}, steps ${t.steps.map((s) => `${s.name}=${s.status}#${s.attempt}`).join(' ')}`;
  } catch (e) {
    return `e.g. task ${id}: ${errorMessage(e)}`;
  }
}
