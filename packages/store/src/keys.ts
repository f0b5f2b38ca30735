/**
 * Every Redis key Triad uses, built here and nowhere else. A task's keys carry the task id as a
 * `{hash tag}` so they stay on one Redis Cluster slot; scripts receive every key in KEYS.
 */
import { NamespaceSchema } from '@triad/protocol';

export interface Keys {
  readonly prefix: string;
  task(taskId: string): string;
  readonly tasks: string;
  readonly deadlines: string;
  readonly finished: string;
  /**
   * Finished tasks that can never be retried (completed, compensated, cancelled), by finish time, until
   * retention compacts their record (decision 0007).
   */
  readonly compact: string;
  workflow(name: string): string;
  readonly workflows: string;
  readonly supervisorLeader: string;
  readonly supervisorEpoch: string;
  readonly supervisorStatus: string;
  readonly alerts: string;
  /**
   * Alerts recorded by a transition, waiting for the leader supervisor to publish them to the ALERTS
   * stream (zset of alert JSON by raisedAt; decision 0009).
   */
  readonly alertOutbox: string;
  /** A Redlock lease on part of a task (`task`: a scheduler's operation), on the task's slot. */
  lease(taskId: string, what: string): string;
}

export function keys(namespace: string): Keys {
  const prefix = `triad:${NamespaceSchema.parse(namespace)}`;
  return {
    prefix,
    task: (taskId) => `${prefix}:task:{${taskId}}`,
    tasks: `${prefix}:tasks`,
    deadlines: `${prefix}:deadlines`,
    finished: `${prefix}:finished`,
    compact: `${prefix}:compact`,
    workflow: (name) => `${prefix}:wf:${name}`,
    workflows: `${prefix}:workflows`,
    supervisorLeader: `${prefix}:supervisor:leader`,
    supervisorEpoch: `${prefix}:supervisor:epoch`,
    supervisorStatus: `${prefix}:supervisor:status`,
    alerts: `${prefix}:alerts`,
    alertOutbox: `${prefix}:alerts:outbox`,
    lease: (taskId, what) => `${prefix}:lease:{${taskId}}:${what}`,
  };
}

/** The step part of a task's own deadline in the deadline index (`#` cannot occur in a step name). */
export const TASK_DEADLINE_STEP = '#task';

/** Reads a deadline index member, `<taskId>|<step>` (written by the Lua deadline_member; neither part may contain "|"). */
export function parseDeadlineMember(member: string): { taskId: string; step: string } | undefined {
  const i = member.lastIndexOf('|');
  if (i <= 0) return undefined;
  return { taskId: member.slice(0, i), step: member.slice(i + 1) };
}
