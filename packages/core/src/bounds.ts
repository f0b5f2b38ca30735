/**
 * How long a task can take, computed from its definition alone (decision 0009): every step phase climbs
 * a bounded ladder, a give-up time caps it, an optional task deadline caps the run, and the undo drains
 * what is in flight, then runs each compensation in turn. A bound is fixed milliseconds plus a number of
 * supervisor decisions, each of which can come up to one sweep interval late.
 */
import { LadderSchema, type Ladder, type StepDefinition, type WorkflowDefinition } from '@triad/protocol';

/** A duration that is `fixedMs` plus up to one sweep interval for each of `sweeps` supervisor decisions. */
export interface Bound {
  fixedMs: number;
  sweeps: number;
}

/** The deployment figures a bound depends on: the supervisor's sweep interval and leadership lease. */
export interface Supervision {
  sweepIntervalMs: number;
  leaderLeaseMs: number;
}

/** TRIAD_SUPERVISOR_INTERVAL_MS and TRIAD_SUPERVISOR_LEASE_MS defaults. */
export const DEFAULT_SUPERVISION: Supervision = { sweepIntervalMs: 1_000, leaderLeaseMs: 5_000 };

const DEFAULT_LADDER = LadderSchema.parse({});

/**
 * The longest a phase's ladder runs if every attempt uses its whole budget and every park its whole
 * back-off: m counted failures and c circuit-open attempts, max(0, m − r − 1) long parks after the
 * counted failures past the immediate retries, and c circuit parks counted at longBackoffMs each. It is
 * the default give-up time (a breaker that half-opens later than that is cut off by it).
 */
export function ladderWorstCaseMs(budgetMs: number, l: Ladder): number {
  const parks = Math.max(0, l.maxFailures - l.retries - 1) + l.maxCircuitOpen;
  return (l.maxFailures + l.maxCircuitOpen) * budgetMs + parks * l.longBackoffMs;
}

/** Supervisor decisions a phase's ladder may need: one per counted failure, per long park and per circuit park. */
export function ladderDecisions(l: Ladder): number {
  return l.maxFailures + Math.max(0, l.maxFailures - l.retries - 1) + l.maxCircuitOpen;
}

/**
 * One phase (a run or a compensation), from its first start to the moment it succeeds or gives up: no
 * attempt starts after its give-up time, and one that started just before runs its whole budget. (A
 * breaker refusal parks the phase until the breaker half-opens, which only the give-up time bounds.)
 */
export function phaseBound(budgetMs: number, ladder: Ladder, giveUpAfterMs: number | undefined): Bound {
  return { fixedMs: (giveUpAfterMs ?? ladderWorstCaseMs(budgetMs, ladder)) + budgetMs, sweeps: ladderDecisions(ladder) };
}

function ladderOf(def: WorkflowDefinition, step: StepDefinition): Ladder {
  return step.ladder ?? def.defaults.ladder ?? DEFAULT_LADDER;
}

export function stepBound(def: WorkflowDefinition, step: StepDefinition): Bound {
  return phaseBound(step.budgetMs, ladderOf(def, step), step.giveUpAfterMs);
}

/** The bound of a step's compensation, or undefined when the step has none. */
export function compensationBound(def: WorkflowDefinition, step: StepDefinition): Bound | undefined {
  const c = step.compensate;
  if (!c) return undefined;
  return phaseBound(c.budgetMs, c.ladder ?? ladderOf(def, step), c.giveUpAfterMs);
}

export function boundMs(b: Bound, s: Supervision = DEFAULT_SUPERVISION): number {
  return b.fixedMs + b.sweeps * s.sweepIntervalMs;
}

function add(a: Bound, b: Bound): Bound {
  return { fixedMs: a.fixedMs + b.fixedMs, sweeps: a.sweeps + b.sweeps };
}

export interface TaskBound {
  /** Per step: the run phase and, where there is one, the compensation. */
  steps: { name: string; run: Bound; compensation?: Bound }[];
  /** From acceptance until the task completes, or its undo begins (or it fails). */
  run: Bound;
  /** From the start of an undo until the task is compensated, cancelled or compensation_failed. */
  undo: Bound;
  /** The whole bound: run + undo, and one leadership lease for a change of supervisor leader. */
  total: Bound;
  /** `total` in ms for the given supervision figures. */
  totalMs: number;
}

/**
 * The longest a task of this definition can take, from acceptance to a terminal state, whatever its
 * services do. Sweeps count the supervisor decisions on the critical path; `supervision` turns them
 * into ms (and adds one leader change).
 */
export function taskBound(def: WorkflowDefinition, supervision: Supervision = DEFAULT_SUPERVISION): TaskBound {
  const byName = new Map(def.steps.map((s) => [s.name, s]));
  const steps = def.steps.map((s) => {
    const comp = compensationBound(def, s);
    return { name: s.name, run: stepBound(def, s), ...(comp ? { compensation: comp } : {}) };
  });
  const runOf = new Map(steps.map((s) => [s.name, s.run]));
  // Longest path through the dependency graph (definitions are acyclic; validation guarantees it).
  const finish = new Map<string, Bound>();
  const finishOf = (name: string): Bound => {
    const known = finish.get(name);
    if (known) return known;
    let start: Bound = { fixedMs: 0, sweeps: 0 };
    for (const dep of byName.get(name)?.dependsOn ?? []) {
      const f = finishOf(dep);
      if (boundMs(f, supervision) > boundMs(start, supervision)) start = f;
    }
    const f = add(start, runOf.get(name) ?? { fixedMs: 0, sweeps: 0 });
    finish.set(name, f);
    return f;
  };
  let run: Bound = { fixedMs: 0, sweeps: 0 };
  for (const s of def.steps) {
    const f = finishOf(s.name);
    if (boundMs(f, supervision) > boundMs(run, supervision)) run = f;
  }
  // The task deadline stops the run (found by a sweep up to one interval late).
  if (def.deadlineMs !== undefined && def.deadlineMs + supervision.sweepIntervalMs < boundMs(run, supervision)) {
    run = { fixedMs: def.deadlineMs, sweeps: 1 };
  }
  // The undo first waits for what is in flight (at most one budget, noticed by a sweep), then runs the
  // compensations one after the other.
  let undo: Bound = { fixedMs: Math.max(0, ...def.steps.map((s) => s.budgetMs)), sweeps: 1 };
  for (const s of steps) if (s.compensation) undo = add(undo, s.compensation);
  const total = add(add(run, undo), { fixedMs: supervision.leaderLeaseMs, sweeps: 0 });
  return { steps, run, undo, total, totalMs: boundMs(total, supervision) };
}

/** "1m 12.5s + 14 sweeps", for operators. */
export function formatBound(b: Bound, s?: Supervision): string {
  const text = `${formatMs(b.fixedMs)}${b.sweeps > 0 ? ` + ${b.sweeps} sweep${b.sweeps === 1 ? '' : 's'}` : ''}`;
  return s ? `${text} (≤ ${formatMs(boundMs(b, s))})` : text;
}

export function formatMs(ms: number): string {
  if (ms < 1_000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1_000;
  const parts: string[] = [];
  if (h > 0) parts.push(`${h}h`);
  if (m > 0) parts.push(`${m}m`);
  if (s > 0 || parts.length === 0) parts.push(`${Number.isInteger(s) ? s : s.toFixed(1)}s`);
  return parts.join(' ');
}
