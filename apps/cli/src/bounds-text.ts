/** `triad workflows show`: a definition's steps with how long each can take before it escalates, as text (decision 0009). */
import { formatBound, formatMs, type Supervision, type TaskBound } from '@triad/core';
import { LadderSchema, type Ladder, type RegisteredWorkflow } from '@triad/protocol';
import { table } from './format.js';

const DEFAULT_LADDER = LadderSchema.parse({});

/** The operator's view of a definition: per step its policy and how long it can take before it escalates. */
export function describeBounds(wf: RegisteredWorkflow, bounds: TaskBound, supervision: Supervision): string {
  const ladderText = (l: Ladder | undefined): string => {
    const x = l ?? wf.defaults.ladder ?? DEFAULT_LADDER;
    return `${x.retries}/${formatMs(x.longBackoffMs)}/${x.maxFailures}/${x.maxCircuitOpen}`;
  };
  const rows = wf.steps.map((step, i) => {
    const b = bounds.steps[i];
    const c = step.compensate;
    return [
      step.name,
      step.agent,
      formatMs(step.budgetMs),
      ladderText(step.ladder),
      b ? formatBound(b.run, supervision) : undefined,
      c ? `${c.agent} ${formatMs(c.budgetMs)}` : '-',
      b?.compensation ? formatBound(b.compensation, supervision) : '-',
    ];
  });
  const lines = [
    `${wf.name} v${wf.version}${wf.description ? ` — ${wf.description}` : ''}`,
    `on failure: ${wf.onFailure}${wf.deadlineMs !== undefined ? `; task deadline ${formatMs(wf.deadlineMs)}` : ''}`,
    '',
    table(['STEP', 'AGENT', 'BUDGET', 'LADDER r/L/m/c', 'ESCALATES WITHIN', 'COMPENSATION', 'UNDONE WITHIN'], rows),
    '',
    `a task ends within ${formatBound(bounds.total, supervision)}:`,
    `  run   ${formatBound(bounds.run, supervision)}  (the longest dependency path${wf.deadlineMs !== undefined ? ', or the deadline' : ''})`,
    `  undo  ${formatBound(bounds.undo, supervision)}  (what is in flight, then every compensation in turn)`,
    `  and one supervisor leader change (${formatMs(supervision.leaderLeaseMs)}); a sweep is at most ${formatMs(supervision.sweepIntervalMs)} (--sweep-interval-ms)`,
    'Each bound counts every attempt at its whole budget, every park at its whole back-off, and stops at the step\'s give-up time (giveUpAfterMs) plus one budget.',
  ];
  return lines.join('\n');
}
