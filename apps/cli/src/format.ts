/**
 * Pure text formatting for the CLI: padded tables, clock/ISO/relative times, durations and event
 * lines. No I/O and no colour, so every function is unit-tested directly.
 */
import type { StepState, TaskEvent, TaskState } from '@triad/protocol';
import { clock, duration, relative } from './times.js';
import { stepDetail } from './waiting.js';

export { clock, duration, relative } from './times.js';
export { elementsDetail, stepDetail } from './waiting.js';

/** What an empty or absent cell shows. */
export const EMPTY = '-';

export type Cell = string | number | boolean | null | undefined;

/** One cell as text on a single line (newlines and tabs become spaces; empty values show as "-"). */
export function cellText(value: Cell): string {
  if (value === null || value === undefined || value === '') return EMPTY;
  return String(value).replace(/[\r\n\t]+/g, ' ');
}

/** Cuts a string to at most `max` characters, ending with "…" when it was cut. */
export function truncate(text: string, max: number): string {
  if (max < 1) return '';
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * A table with a header row: columns separated by two spaces, padded to the widest cell, no
 * trailing spaces. Returns the lines joined with "\n" (no final newline).
 */
export function table(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = [headers.map((h) => h), ...rows.map((r) => headers.map((_, i) => cellText(r[i])))];
  const widths = headers.map((_, i) => Math.max(...text.map((r) => (r[i] ?? '').length)));
  return text
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** "key: value" lines with the keys padded to the same width; absent values are skipped. */
export function keyValues(pairs: readonly (readonly [string, Cell])[]): string {
  const shown = pairs.filter(([, v]) => v !== undefined && v !== null && v !== '');
  const width = Math.max(0, ...shown.map(([k]) => k.length + 1));
  return shown.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${cellText(v)}`).join('\n');
}

/** ISO 8601 in UTC ("2024-01-02T03:04:05.006Z"); "-" for an absent or invalid time. */
export function isoTime(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return EMPTY;
  return new Date(ms).toISOString();
}

/** An interval as `--every` takes it: the largest unit that divides it (`10s`, `5m`, `1500ms`). */
export function everyText(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** How a schedule fires, for humans: `every 10s` or `cron "0 2 * * *" (Europe/Paris)`. */
export function timingText(s: { every?: number | undefined; cron?: string | undefined; timezone?: string | undefined }): string {
  if (s.every !== undefined) return `every ${everyText(s.every)}`;
  return `cron "${s.cron ?? ''}" (${s.timezone ?? 'UTC'})`;
}

/** ISO time and relative time together: "2024-01-02T03:04:05.006Z (in 4.2s)"; "-" when absent. */
export function when(ms: number | undefined, now: number = Date.now()): string {
  if (ms === undefined || !Number.isFinite(ms)) return EMPTY;
  return `${isoTime(ms)} (${relative(ms, now)})`;
}

/** The widest event type ("compensation_started"), so event lines align. */
const EVENT_TYPE_WIDTH = 20;

/** One event for humans: "HH:MM:SS.mmm  #seq  type  step attempt N  reason". */
export function eventLine(ev: TaskEvent): string {
  const parts = [clock(ev.at), `#${ev.seq}`.padEnd(4), ev.type.padEnd(EVENT_TYPE_WIDTH)];
  const where = [ev.step, ev.attempt !== undefined ? `attempt ${ev.attempt}` : undefined].filter((x) => x !== undefined).join(' ');
  if (where) parts.push(where);
  if (ev.signal !== undefined && ev.type !== 'signal_received') parts.push(`signal ${ev.signal}`);
  if (ev.until !== undefined) parts.push(`until ${clock(ev.until).slice(0, 8)}`);
  const reason = ev.reason ?? ev.error?.message;
  if (reason) parts.push(cellText(reason));
  return parts.join('  ').trimEnd();
}

/** The task header of `triad status` (`waiting`: what its first waiting step waits for). */
export function taskHeader(t: TaskState, now: number = Date.now(), waiting?: string): string {
  return keyValues([
    ['task', t.taskId],
    ['workflow', `${t.workflow}@${t.version}`],
    ['status', t.status],
    // A child task (decision 0019 §5.1): the task and the step that started it.
    ['parent', t.parent ? `${t.parent.taskId} (step ${t.parent.step})` : undefined],
    // The task-level reason (decision 0021 §3.5): the first step that waits, and for what — or, before any
    // step started, its admission (decision 0024).
    ['waiting', t.admission === 'waiting' ? `for admission: its client ${t.client ?? ''} has as many active tasks as TRIAD_CLIENT_ACTIVE_TASKS allows in this task's bucket; it starts when one of them ends` : t.admission === 'admitted' ? 'admitted: its steps start now (or within 5 s and a supervisor sweep)' : waiting],
    // Only a priority other than the default 3 is stored (decision 0020).
    ['priority', t.priority !== undefined ? `${t.priority} (1 highest … 5 lowest; 3 by default)` : undefined],
    // A compacted record (decision 0007) no longer keeps who drove the task.
    ['locked by', t.compacted ? undefined : (t.lockedBy ?? EMPTY)],
    ['lock epoch', t.compacted ? undefined : t.lockEpoch],
    ['record', t.compacted ? "compacted by retention (no lock, no deadlines, a completed task's input dropped)" : undefined],
    ['created', when(t.createdAt, now)],
    ['updated', when(t.updatedAt, now)],
    ['finished', t.finishedAt !== undefined ? when(t.finishedAt, now) : undefined],
    ['error', t.error],
  ]);
}

/**
 * The steps table of `triad status`. A step being (or that was) compensated shows its compensation's
 * agent, attempt, holder, deadline and failures, since that is what is running for it.
 */
export function stepsTable(steps: readonly StepState[], now: number = Date.now(), waiting?: (s: StepState) => string | undefined): string {
  const rows = steps.map((s) => {
    const c = s.compensation;
    // What it waits for (decision 0021 §3), else what 0019's kinds say of it.
    const detail = waiting?.(s) ?? stepDetail(s, now);
    if (!c) return [s.name, s.agent, s.status, s.attempt, s.lockedBy, completeByText(s, now), s.failureCount, s.order, detail];
    const deadline = c.completeBy === undefined ? undefined : s.status === 'compensating' ? when(c.completeBy, now) : isoTime(c.completeBy);
    return [s.name, `${c.agent} (undo)`, c.parked ? `${s.status} (parked)` : s.status, c.attempt, c.lockedBy, deadline, c.failureCount, s.order, detail];
  });
  return table(['STEP', 'AGENT', 'STATUS', 'ATTEMPT', 'LOCKED BY', 'COMPLETE BY', 'FAILURES', 'DONE #', 'DETAIL'], rows);
}

/**
 * A step's deadline: ISO and relative while the step is in flight (that is when it matters: "in
 * 4.2s", or "3.1s ago" once it passed and the supervisor is due), ISO only otherwise.
 */
export function completeByText(s: Pick<StepState, 'status' | 'completeBy'>, now: number = Date.now()): string {
  if (s.completeBy === undefined) return EMPTY;
  return s.status === 'processing' || s.status === 'compensating' ? when(s.completeBy, now) : isoTime(s.completeBy);
}

/** The summary printed when a waited-for task ends: one line per step with its time and its error (or why it was skipped). */
export function summaryTable(steps: readonly StepState[]): string {
  return table(
    ['STEP', 'AGENT', 'STATUS', 'ATTEMPT', 'FAILURES', 'TOOK', 'ERROR / DETAIL'],
    steps.map((s) => [
      s.name,
      s.agent,
      s.status,
      s.attempt,
      s.failureCount,
      s.startedAt !== undefined && s.finishedAt !== undefined ? duration(s.finishedAt - s.startedAt) : undefined,
      errorOrDetail(s),
    ]),
  );
}

function errorOrDetail(s: StepState): string | undefined {
  const text = s.error ?? stepDetail(s);
  return text !== undefined ? truncate(cellText(text), 120) : undefined;
}

/** The one-line outcome of a task: "task t1 completed (orders@2, took 1.2s)". */
export function finalLine(t: TaskState): string {
  const took = t.finishedAt !== undefined ? `, took ${duration(t.finishedAt - t.createdAt)}` : '';
  return `task ${t.taskId} ${t.status} (${t.workflow}@${t.version}${took})${t.error ? `: ${cellText(t.error)}` : ''}`;
}

/** The stable JSON shape of a task outcome (`submit --wait --json`, `watch --json`'s last line). */
export function taskJson(t: TaskState): Record<string, unknown> {
  return {
    taskId: t.taskId,
    status: t.status,
    workflow: t.workflow,
    version: t.version,
    steps: t.steps.map((s) => ({
      name: s.name,
      agent: s.agent,
      status: s.status,
      attempt: s.attempt,
      failureCount: s.failureCount,
      lockedBy: s.lockedBy ?? null,
      completeBy: s.completeBy ?? null,
      startedAt: s.startedAt ?? null,
      finishedAt: s.finishedAt ?? null,
      output: s.output ?? null,
      error: s.error ?? null,
      reason: s.reason ?? null,
      // Only where they apply: the kind of a step that does not call an agent, a fan-out step's elements.
      ...(s.kind !== undefined ? { kind: s.kind } : {}),
      ...(s.items !== undefined ? { items: s.items } : {}),
      ...(s.child !== undefined ? { child: s.child } : {}),
    })),
    error: t.error ?? null,
    // A child task's parent and output (decision 0019 §5), only for a child.
    ...(t.parent !== undefined ? { parent: t.parent, output: t.output ?? null } : {}),
  };
}
