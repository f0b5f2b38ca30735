/**
 * How long a task can take, computed from its definition alone (decision 0009): every step phase climbs
 * a bounded ladder, a give-up time caps it, an optional task deadline caps the run, and the undo drains
 * what is in flight, then runs each compensation in turn. A bound is fixed milliseconds plus a number of
 * supervisor decisions, each of which can come up to one sweep interval late. Sleeps and waits end by
 * their time, a fan-out step runs its elements in waves, and a child step within its child's own bound
 * (decision 0019 §1.9).
 */
import { DEFAULT_MAX_ITEMS, DEFAULT_MAX_PARALLEL, LadderSchema, type Ladder, type StepDefinition, type WorkflowDefinition } from '@triad/protocol';

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

/** One attempt ladder of an agent step (one element's, for a fan-out step). */
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
  /**
   * Per step: the run phase and, where there is one, the compensation; `unknown` says why a child step's
   * bound cannot be computed (its run then counts as 0 here).
   */
  steps: { name: string; run: Bound; compensation?: Bound; unknown?: string }[];
  /** From acceptance until the task completes, or its undo begins (or it fails). */
  run: Bound;
  /** From the start of an undo until the task is compensated, cancelled or compensation_failed. */
  undo: Bound;
  /** The whole bound: run + undo, and one leadership lease for a change of supervisor leader. */
  total: Bound;
  /** `total` in ms for the given supervision figures. */
  totalMs: number;
  /**
   * Present when the bound cannot be computed — a child workflow is not registered (or they form a
   * cycle): why, one reason per step. The figures above then leave those steps out and are no bound.
   */
  unknown?: string[];
}

/**
 * A child step's workflow, as the scheduler will resolve it when the child starts: the pinned version,
 * else the latest. Undefined when it is not registered.
 */
export type ChildResolver = (workflow: string, version?: number) => WorkflowDefinition | undefined;

const ZERO: Bound = { fixedMs: 0, sweeps: 0 };

function longer(a: Bound, b: Bound, s: Supervision): Bound {
  return boundMs(b, s) > boundMs(a, s) ? b : a;
}

function times(n: number, b: Bound): Bound {
  return { fixedMs: n * b.fixedMs, sweeps: n * b.sweeps };
}

/** How many times a fan-out step's pool may be refilled: waves of up to maxParallel elements. */
export function fanOutWaves(step: StepDefinition): number {
  if (step.forEach === undefined) return 1;
  const items = step.maxItems ?? DEFAULT_MAX_ITEMS;
  return Math.ceil(items / (step.maxParallel ?? Math.min(DEFAULT_MAX_PARALLEL, items)));
}

/**
 * The longest a task of this definition can take, from acceptance to a terminal state, whatever its
 * services do. Sweeps count the supervisor decisions on the critical path; `supervision` turns them
 * into ms (and adds one leader change). `children` resolves the workflows child steps start; without
 * it (or when one is not registered) the bound is `unknown`.
 */
export function taskBound(def: WorkflowDefinition, supervision: Supervision = DEFAULT_SUPERVISION, children?: ChildResolver): TaskBound {
  return boundOf(def, supervision, children, [def.name]);
}

function boundOf(def: WorkflowDefinition, supervision: Supervision, children: ChildResolver | undefined, path: readonly string[]): TaskBound {
  const byName = new Map(def.steps.map((s) => [s.name, s]));
  const unknown: string[] = [];
  // The undo first waits for what is in flight (at most one budget, or a child's own undo), noticed by
  // a sweep, then runs the compensations one after the other.
  let drain: Bound = ZERO;
  const steps = def.steps.map((s): TaskBound['steps'][number] => {
    if (s.sleep) return { name: s.name, run: { fixedMs: 'ms' in s.sleep ? s.sleep.ms : s.sleep.maxMs, sweeps: 1 } };
    if (s.waitFor) return { name: s.name, run: { fixedMs: s.waitFor.timeoutMs, sweeps: 1 } };
    if (s.child) {
      const child = childBound(s.name, s.child, supervision, children, path);
      if ('unknown' in child) {
        unknown.push(child.unknown);
        return { name: s.name, run: ZERO, unknown: child.unknown };
      }
      // The check or timeout and the notice: 2 sweeps; undone by the child's own undo and a notice.
      const run = add(child.run, { fixedMs: 0, sweeps: 2 });
      const compensation = add(child.undo, { fixedMs: 0, sweeps: 1 });
      drain = longer(drain, compensation, supervision);
      return { name: s.name, run, compensation };
    }
    drain = longer(drain, { fixedMs: s.budgetMs, sweeps: 0 }, supervision);
    const waves = fanOutWaves(s);
    const comp = compensationBound(def, s);
    return { name: s.name, run: times(waves, stepBound(def, s)), ...(comp ? { compensation: times(waves, comp) } : {}) };
  });
  const runOf = new Map(steps.map((s) => [s.name, s.run]));
  // Longest path through the dependency graph (definitions are acyclic; validation guarantees it).
  const finish = new Map<string, Bound>();
  const finishOf = (name: string): Bound => {
    const known = finish.get(name);
    if (known) return known;
    let start: Bound = ZERO;
    for (const dep of byName.get(name)?.dependsOn ?? []) start = longer(start, finishOf(dep), supervision);
    const f = add(start, runOf.get(name) ?? ZERO);
    finish.set(name, f);
    return f;
  };
  let run: Bound = ZERO;
  for (const s of def.steps) run = longer(run, finishOf(s.name), supervision);
  // The task deadline stops the run (found by a sweep up to one interval late).
  if (def.deadlineMs !== undefined && def.deadlineMs + supervision.sweepIntervalMs < boundMs(run, supervision)) {
    run = { fixedMs: def.deadlineMs, sweeps: 1 };
  }
  let undo: Bound = add(drain, { fixedMs: 0, sweeps: 1 });
  for (const s of steps) if (s.compensation) undo = add(undo, s.compensation);
  const total = add(add(run, undo), { fixedMs: supervision.leaderLeaseMs, sweeps: 0 });
  return { steps, run, undo, total, totalMs: boundMs(total, supervision), ...(unknown.length > 0 ? { unknown } : {}) };
}

/**
 * A child step's run: the child's whole bound (it ends within it whatever happens), or with timeoutMs
 * the timeout and then the child's undo (the parent cancels it and waits for its end), whichever is
 * shorter; and the child's undo (decision 0019 §1.9).
 */
function childBound(
  step: string,
  child: NonNullable<StepDefinition['child']>,
  supervision: Supervision,
  children: ChildResolver | undefined,
  path: readonly string[],
): { run: Bound; undo: Bound } | { unknown: string } {
  const named = `workflow "${child.workflow}"${child.version !== undefined ? ` v${child.version}` : ''}`;
  if (path.includes(child.workflow)) return { unknown: `child workflows form a cycle: ${[...path, child.workflow].join(' -> ')}` };
  const def = children?.(child.workflow, child.version);
  if (!def) {
    return { unknown: `step "${step}" starts ${named}, which ${children ? 'is not registered' : 'was not looked up'}: its bound is the child's own` };
  }
  const b = boundOf(def, supervision, children, [...path, child.workflow]);
  if (b.unknown) return { unknown: `step "${step}" starts ${named}, whose bound is unknown (${b.unknown.join('; ')})` };
  let run = b.total;
  if (child.timeoutMs !== undefined) run = shorter(run, add({ fixedMs: child.timeoutMs, sweeps: 0 }, b.undo), supervision);
  return { run, undo: b.undo };
}

function shorter(a: Bound, b: Bound, s: Supervision): Bound {
  return boundMs(b, s) < boundMs(a, s) ? b : a;
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
