/**
 * Every NATS subject, stream and consumer name, built from one namespace so that two namespaces on
 * the same NATS and Redis never see each other.
 */
import { z } from 'zod';

export const NAMESPACE_PATTERN = /^[A-Za-z0-9_-]{1,40}$/;
export const NamespaceSchema = z
  .string()
  .regex(NAMESPACE_PATTERN, 'a namespace is 1-40 letters, digits, "_" or "-" (it becomes part of subjects and stream names)');

/** Names of workflows, steps and agents: safe as a NATS subject token, a Redis field and a stream-name part. */
export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
export const NameSchema = z
  .string()
  .regex(NAME_PATTERN, 'a name starts with a letter and has at most 64 letters, digits, "_" or "-"');

/** Task ids travel as a subject token (events) and inside Redis hash tags: no dots, wildcards, braces or spaces. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_:-]{1,128}$/;
export const TaskIdSchema = z
  .string()
  .regex(TASK_ID_PATTERN, 'a task id is 1-128 letters, digits, "_", "-" or ":"');

export interface Names {
  readonly namespace: string;
  readonly subjects: {
    readonly submit: string;
    /** Step requests for one agent type. */
    step(agent: string): string;
    readonly stepAll: string;
    readonly result: string;
    readonly command: string;
    event(taskId: string): string;
    readonly eventAll: string;
    readonly alert: string;
    deadLetter(source: string): string;
    readonly deadLetterAll: string;
    /** Request/reply API served by the schedulers (queue group). */
    api(op: ApiOp): string;
    readonly apiAll: string;
    readonly health: string;
  };
  readonly streams: {
    readonly submit: string;
    readonly steps: string;
    readonly results: string;
    readonly commands: string;
    readonly events: string;
    readonly alerts: string;
    readonly deadLetters: string;
  };
  readonly consumers: {
    readonly scheduler: string;
    readonly results: string;
    readonly commands: string;
    agent(agent: string): string;
  };
  readonly queueGroup: string;
}

export const API_OPS = ['workflow.register', 'workflow.get', 'workflow.list', 'task.get', 'task.list', 'task.retry', 'task.cancel', 'alert.list', 'supervisor.status'] as const;
export type ApiOp = (typeof API_OPS)[number];

export function names(namespace: string): Names {
  const ns = NamespaceSchema.parse(namespace);
  const p = `triad.${ns}`;
  const s = `TRIAD_${ns}`;
  return {
    namespace: ns,
    subjects: {
      submit: `${p}.submit`,
      step: (agent) => `${p}.step.${agent}`,
      stepAll: `${p}.step.*`,
      result: `${p}.result`,
      command: `${p}.command`,
      event: (taskId) => `${p}.event.${taskId}`,
      eventAll: `${p}.event.*`,
      alert: `${p}.alert`,
      deadLetter: (source) => `${p}.dlq.${source}`,
      deadLetterAll: `${p}.dlq.*`,
      api: (op) => `${p}.api.${op}`,
      apiAll: `${p}.api.>`,
      health: `${p}.health`,
    },
    streams: {
      submit: `${s}_SUBMIT`,
      steps: `${s}_STEPS`,
      results: `${s}_RESULTS`,
      commands: `${s}_COMMANDS`,
      events: `${s}_EVENTS`,
      alerts: `${s}_ALERTS`,
      deadLetters: `${s}_DLQ`,
    },
    consumers: {
      scheduler: 'scheduler',
      results: 'results',
      commands: 'commands',
      agent: (agent) => `agent-${agent}`,
    },
    queueGroup: `triad-${ns}-scheduler`,
  };
}
