/** `triad workflows show`: a definition's steps with how long each can take before it escalates, as text (decisions 0009, 0019). */
import { childResolver, describePredicate, fanOutWaves, formatBound, formatMs, stepKind, valueReference, referenceText, type Supervision, type TaskBound } from '@triad/core';
import { DEFAULT_MAX_ITEMS, DEFAULT_MAX_PARALLEL, LadderSchema, type AgentLimitStatus, type Ladder, type RegisteredWorkflow, type StepDefinition } from '@triad/protocol';
import { duration, table } from './format.js';
import { describeLimit } from './limits-text.js';

const DEFAULT_LADDER = LadderSchema.parse({});

/** The workflows a definition's child steps start (core's childResolver; re-exported for the commands). */
export { childResolver };

/** What a step does, for the AGENT / KIND column. */
function kindText(step: StepDefinition): string {
  switch (stepKind(step)) {
    case 'sleep':
      return step.sleep && 'untilInput' in step.sleep ? `sleep until input ${step.sleep.untilInput}` : 'sleep';
    case 'waitFor':
      return `waitFor signal ${step.waitFor?.signal ?? ''}`;
    case 'child':
      return `child ${step.child?.workflow ?? ''}${step.child?.version !== undefined ? `@${step.child.version}` : ''}`;
    default: {
      if (step.forEach === undefined) return step.agent ?? '';
      const items = step.maxItems ?? DEFAULT_MAX_ITEMS;
      const parallel = step.maxParallel ?? Math.min(DEFAULT_MAX_PARALLEL, items);
      return `${step.agent ?? ''} forEach ${referenceText(valueReference(step.forEach))} (≤ ${items} items, ${parallel} at once)`;
    }
  }
}

/** The BUDGET column: an agent's complete-by budget, a sleep's time, a wait's or a child's timeout. */
function budgetText(step: StepDefinition): string {
  if (step.sleep) return 'ms' in step.sleep ? formatMs(step.sleep.ms) : `≤ ${formatMs(step.sleep.maxMs)}`;
  if (step.waitFor) return `timeout ${formatMs(step.waitFor.timeoutMs)}`;
  if (step.child) return step.child.timeoutMs !== undefined ? `timeout ${formatMs(step.child.timeoutMs)}` : '-';
  return formatMs(step.budgetMs);
}

/** The operator's view of a definition: per step its policy and how long it can take before it escalates. */
export function describeBounds(wf: RegisteredWorkflow, bounds: TaskBound, supervision: Supervision): string {
  const ladderText = (l: Ladder | undefined): string => {
    const x = l ?? wf.defaults.ladder ?? DEFAULT_LADDER;
    return `${x.retries}/${formatMs(x.longBackoffMs)}/${x.maxFailures}/${x.maxCircuitOpen}`;
  };
  const rows = wf.steps.map((step, i) => {
    const b = bounds.steps[i];
    const c = step.compensate;
    const agent = stepKind(step) === 'agent';
    const waves = fanOutWaves(step);
    return [
      step.name,
      kindText(step),
      budgetText(step),
      agent ? ladderText(step.ladder) : '-',
      b?.unknown !== undefined ? 'unknown' : b ? formatBound(b.run, supervision) : undefined,
      c ? `${c.agent} ${formatMs(c.budgetMs)}${waves > 1 ? ' per item' : ''}` : step.child ? 'undo the child' : '-',
      b?.compensation ? formatBound(b.compensation, supervision) : b?.unknown !== undefined && step.child ? 'unknown' : '-',
    ];
  });
  const conditions = wf.steps.filter((s) => s.when !== undefined).map((s) => `  ${s.name} runs only when ${describePredicate(s.when ?? { all: [] })}; else it is skipped`);
  const lines = [
    `${wf.name} v${wf.version}${wf.description ? ` — ${wf.description}` : ''}`,
    `on failure: ${wf.onFailure}${wf.deadlineMs !== undefined ? `; task deadline ${formatMs(wf.deadlineMs)}` : ''}`,
    '',
    table(['STEP', 'AGENT / KIND', 'BUDGET', 'LADDER r/L/m/c', 'ESCALATES WITHIN', 'COMPENSATION', 'UNDONE WITHIN'], rows),
    ...(conditions.length > 0 ? ['', 'conditions:', ...conditions] : []),
    '',
  ];
  if (bounds.unknown) {
    lines.push('a task\'s bound is unknown:', ...bounds.unknown.map((u) => `  ${u}`), 'Register the missing workflow (or break the cycle), then show this one again.');
    return lines.join('\n');
  }
  lines.push(
    `a task ends within ${formatBound(bounds.total, supervision)}:`,
    `  run   ${formatBound(bounds.run, supervision)}  (the longest dependency path${wf.deadlineMs !== undefined ? ', or the deadline' : ''})`,
    `  undo  ${formatBound(bounds.undo, supervision)}  (what is in flight, then every compensation in turn)`,
    `  and one supervisor leader change (${formatMs(supervision.leaderLeaseMs)}); a sweep is at most ${formatMs(supervision.sweepIntervalMs)} (--sweep-interval-ms)`,
    'Each bound counts every attempt at its whole budget, every park at its whole back-off, and stops at the step\'s give-up time (giveUpAfterMs) plus one budget.',
  );
  const waits = wf.steps.some((s) => s.sleep || s.waitFor || s.child || s.forEach);
  if (waits) {
    lines.push('A sleep or a wait counts its whole time (or timeout) and the sweep that ends it; a fan-out step its items in waves of maxParallel; a child step its child\'s own bound.');
  }
  return lines.join('\n');
}

/**
 * After the bounds, the dispatch limits in force on the agent types this workflow calls (decision 0020
 * §5.6): waiting for them is not part of the bounds, each phase waits before each start (at most m + c
 * starts with its ladder), and `deadlineMs` is what caps a task's total time. Empty when none is limited.
 */
export function describeLimitsNow(wf: RegisteredWorkflow, limits: readonly AgentLimitStatus[]): string {
  const lines: string[] = [];
  for (const l of limits) {
    if (!l.limit) continue;
    const phases = wf.steps.flatMap((s) => [
      ...(s.agent === l.agent && stepKind(s) === 'agent' ? [s.ladder ?? wf.defaults.ladder ?? DEFAULT_LADDER] : []),
      ...(s.compensate?.agent === l.agent ? [s.compensate.ladder ?? wf.defaults.ladder ?? DEFAULT_LADDER] : []),
    ]);
    if (phases.length === 0) continue;
    const starts = Math.max(...phases.map((x) => x.maxFailures + x.maxCircuitOpen));
    const waiting = `${l.waiting.toLocaleString('en-US')} waiting${l.oldestWaitMs !== undefined ? `, oldest ${duration(l.oldestWaitMs)}` : ''}`;
    lines.push(
      `limits now: ${l.agent} — ${describeLimit(l.limit)} (${waiting})`,
      `  steps calling ${l.agent} may wait for that limit before each start (at most ${starts} starts per phase with ${phases.length === 1 ? 'its' : 'their'} ladder${phases.length === 1 ? '' : 's'});`,
      `  waiting is not part of the bounds above. ${wf.deadlineMs !== undefined ? `The task deadline (${formatMs(wf.deadlineMs)}) caps the task's total time, waits included.` : "deadlineMs (not set) would cap the task's total time."}`,
    );
  }
  return lines.join('\n');
}
