/** The BullMQ peer's task: a parent job with S sequential no-op children (each the child of the next). */
import type { FlowJob } from 'bullmq';

export const STEPS_QUEUE = 'steps';
export const TASKS_QUEUE = 'tasks';

/** Step 1 is the innermost child: BullMQ runs a job once its children are done, so steps run 1, 2, …, S, then the parent. */
export function taskFlow(id: string, steps: number): FlowJob {
  let chain: FlowJob | undefined;
  for (let i = 1; i <= steps; i++) {
    chain = { name: `step${i}`, queueName: STEPS_QUEUE, data: { i }, opts: { jobId: `${id}.s${i}` }, ...(chain ? { children: [chain] } : {}) };
  }
  return { name: 'task', queueName: TASKS_QUEUE, data: {}, opts: { jobId: id }, ...(chain ? { children: [chain] } : {}) };
}
