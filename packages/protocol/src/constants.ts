/**
 * The protocol's plain constants — name patterns and the task statuses — without zod, so a program that
 * needs only these (the CLI's argument parsing and help) does not load the schemas
 * (`@triad/protocol/constants`). The schemas in names.ts and messages.ts are built from them.
 */

export const NAMESPACE_PATTERN = /^[A-Za-z0-9_-]{1,40}$/;

/** Names of workflows, steps and agents: safe as a NATS subject token, a Redis field and a stream-name part. */
export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

/** Task ids travel as a subject token (events) and inside Redis hash tags: no dots, wildcards, braces or spaces. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_:-]{1,128}$/;

/** The client identity of a process that names none (TRIAD_CLIENT_ID unset). */
export const DEFAULT_CLIENT_ID = 'default';

/** A task's statuses, in the order a task can reach them. */
export const TASK_STATUSES = ['running', 'completed', 'failed', 'compensating', 'compensated', 'compensation_failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export const TERMINAL_TASK_STATUSES: readonly TaskStatus[] = ['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled'];
/** Whether a task status is terminal; a status this version does not know is not (protocol §9). */
export function isTerminal(status: string): boolean {
  return (TERMINAL_TASK_STATUSES as readonly string[]).includes(status);
}

/** A throttled result's pause when the service gave no Retry-After (decision 0020 §5.1), ms. */
export const DEFAULT_THROTTLE_RETRY_AFTER_MS = 1_000;
/** The longest pause a Retry-After can ask for (decision 0020 §1.5: `MAX_PAUSE_MS`), ms. */
export const MAX_THROTTLE_RETRY_AFTER_MS = 3_600_000;
