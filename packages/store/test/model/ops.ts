// The operations of the model-based test as plain data (so a shrunk counterexample prints as JSON and
// can be replayed as a regression case), their fast-check arbitraries, and how an operation finds its
// target in the current state (a `pick` index into the candidates, so shrinking keeps ops meaningful).
import fc from 'fast-check';
import { compInFlight, expectedAgent, queuedPhase, runInFlight, type Kind, type Model, type ResultOutcome, type StepM, type TaskM } from './model.js';
import { SHAPES, type PlanChoice } from './plans.js';

export type When = 'due' | 'early' | 'now';

/** Who sends a forged result: another step's agent, the same step's agent of the other phase, or a type no plan names. */
export type ForgedBy = 'other-step' | 'other-phase' | 'stranger';

export type Op =
  /**
   * Client number `client` (0 when absent) submits a task; `publish: false` = the scheduler crashed after
   * the write, before the dispatch.
   */
  | { t: 'submit'; choice: PlanChoice; publish: boolean; client?: number }
  /** A submission of a task id that exists (a redelivery, or another client reusing it): nothing changes. */
  | { t: 'resubmit'; pick: number; client: number }
  | { t: 'advance'; ms: number }
  /**
   * A result for the current, visible attempt of a running phase (a run or a compensation), from agent
   * instance number `agent` (0 when absent) of the phase's agent type.
   */
  | { t: 'result'; pick: number; outcome: ResultOutcome; lag: number; publish: boolean; agent?: number }
  /** A result for an older attempt of a phase. */
  | { t: 'stale'; pick: number; back: number; outcome: ResultOutcome }
  /** A result that was already applied, delivered again. */
  | { t: 'duplicate'; pick: number }
  /** A result for an attempt that never started. */
  | { t: 'unstarted'; pick: number; kind: Kind; ahead: number; outcome: ResultOutcome }
  /** A result for the current, visible attempt of a running phase sent on another agent type's subject (decision 0010). */
  | { t: 'forged'; pick: number; by: ForgedBy; outcome: ResultOutcome }
  /** The supervisor expires one step: at its deadline (`due`), before it (`early`), or any step at the current time. */
  | { t: 'expire'; pick: number; when: When; lag: number; publish: boolean }
  | { t: 'expireTask'; pick: number; when: When; publish: boolean }
  /** A whole supervisor sweep: expiredSteps(now), then every expiry it lists. */
  | { t: 'sweep'; publish: boolean }
  /** A new supervisor leader: the epoch grows. */
  | { t: 'takeover' }
  /** The deposed leader writes at its old epoch. */
  | { t: 'deposed'; pick: number }
  /** An operator's retry of a task that has something to retry (`any`: of any task, mostly refused). */
  | { t: 'retry'; pick: number; step: number | null; any: boolean; lag: number; publish: boolean }
  | { t: 'cancel'; pick: number; lag: number; publish: boolean }
  /** A scheduler re-sends a task's requests in flight (inFlight), e.g. after a redelivery. */
  | { t: 'resend'; pick: number }
  /** The leader supervisor publishes the alert outbox. */
  | { t: 'publishAlerts' }
  /**
   * An operator's signal for a task (decision 0019 §3): the name a step waits for or another; an id
   * from a pool of 3 (so repeats happen), and data the waiting step takes as its output.
   */
  | { t: 'signal'; pick: number; name: 'waited' | 'other'; id: number; data: number }
  /**
   * A scheduler starts a grant of a phase waiting for a dispatch limit (startQueued, decision 0020 Q4):
   * `late` — so close to the granted complete-by that it is refused (Q10); `old` — with the ticket of an
   * earlier wait of the phase (Q11: stale). The limiter itself is tested on its own (limits-model.test.ts).
   */
  | { t: 'grant'; pick: number; late: boolean; old: boolean; lag: number; publish: boolean }
  /**
   * The leader delivers a finished child's notice to its parent (decision 0019 §5.3); with `takeover`, a
   * new leader is elected after the take or after childEnded, and the rest of the delivery is refused.
   */
  | { t: 'notice'; pick: number; takeover: 'none' | 'taken' | 'ended' }
  /**
   * An admitted task is started (admitTask.lua, decision 0024): by the scheduler whose transition admitted
   * it (under the lease), or by the leader supervisor (at its epoch); `publish: false` = lost before its sends.
   */
  | { t: 'admit'; pick: number; by: 'scheduler' | 'supervisor'; publish: boolean };

/** The signal names the signal op sends: the one the approve shape waits for, and one no step waits for. */
export const SIGNAL_NAMES = { waited: 'approved', other: 'rejected' } as const;

/** What the test's environment adds to the model: which requests agents saw, and the results applied. */
export interface AppliedResult {
  taskId: string;
  step: string;
  kind: Kind;
  attempt: number;
  outcome: ResultOutcome;
  /** The agent type whose result subject it came on. */
  agentType: string;
  /** The agent instance that sent it (recorded as the phase's lockedBy). */
  agentId: string;
}

export interface World {
  model: Model;
  /** Requests that reached the agents: `task|step|kind|attempt`. */
  visible: Set<string>;
  history: AppliedResult[];
}

export const MAX_TASKS = 3;

export function attemptKey(taskId: string, step: string, kind: Kind, attempt: number): string {
  return `${taskId}|${step}|${kind}|${attempt}`;
}

export interface Target {
  task: TaskM;
  step: StepM;
  kind: Kind;
  attempt: number;
}

function pickOf<T>(xs: T[], pick: number): T | undefined {
  return xs.length === 0 ? undefined : xs[pick % xs.length];
}

function tasks(w: World): TaskM[] {
  return [...w.model.tasks.values()];
}

function phases(w: World): Target[] {
  const out: Target[] = [];
  for (const task of tasks(w)) {
    for (const step of task.steps.values()) {
      // A sleep or a wait has no phase an agent runs (any result for it is forged: packages/store/test/sleep.test.ts).
      if (step.spec.agent === '') continue;
      // A fan-out step's phases are its elements' (decision 0019 §4): each answered on its own.
      for (const s of step.spec.forEach ? (step.elements ?? []) : [step]) {
        out.push({ task, step: s, kind: 'run', attempt: s.run.attempt });
        if (s.comp) out.push({ task, step: s, kind: 'compensate', attempt: s.comp.attempt });
      }
    }
  }
  return out;
}

/** Current attempts an agent may answer: visible, running, not yet answered. */
export function answerable(w: World): Target[] {
  return phases(w).filter((p) => {
    if (!w.visible.has(attemptKey(p.task.id, p.step.spec.name, p.kind, p.attempt))) return false;
    if (p.kind === 'run') return (p.task.status === 'running' || p.task.status === 'compensating') && runInFlight(p.step);
    return p.task.status === 'compensating' && compInFlight(p.step);
  });
}

/** The agent type a forged result claims to come from: never the one the plan names for the target's phase. */
function forgedType(target: Target, by: ForgedBy): string {
  const own = expectedAgent(target.step, target.kind);
  const candidates: string[] = [];
  if (by === 'other-step') for (const s of target.task.steps.values()) if (s !== target.step) candidates.push(s.spec.agent, ...(s.spec.comp ? [s.spec.comp.agent] : []));
  if (by === 'other-phase') candidates.push(target.kind === 'run' ? (target.step.spec.comp?.agent ?? '') : target.step.spec.agent);
  return candidates.find((a) => a !== '' && a !== own) ?? 'intruder';
}

/** Step members of the deadline index the model expects, as targets, in a stable order. */
function indexed(w: World): { taskId: string; step: string; score: number }[] {
  return [...w.model.expectedDeadlines()]
    .map(([member, score]) => {
      const i = member.lastIndexOf('|');
      return { taskId: member.slice(0, i), step: member.slice(i + 1), score };
    })
    .sort((a, b) => (a.taskId + a.step < b.taskId + b.step ? -1 : a.taskId + a.step > b.taskId + b.step ? 1 : 0));
}

export type Resolved =
  | { t: 'submit' }
  | { t: 'resubmit'; task: TaskM }
  | { t: 'advance' }
  | { t: 'result'; target: Target }
  | { t: 'stale'; target: Target; attempt: number }
  | { t: 'duplicate'; result: AppliedResult }
  | { t: 'unstarted'; target: Target; attempt: number }
  | { t: 'forged'; target: Target; agentType: string }
  | { t: 'expire'; taskId: string; step: string; now: number }
  | { t: 'expireTask'; taskId: string; now: number }
  | { t: 'sweep' }
  | { t: 'takeover' }
  | { t: 'deposed'; taskId: string; step: string; now: number }
  | { t: 'notice'; taskId: string }
  | { t: 'task'; task: TaskM }
  | { t: 'publishAlerts' }
  | { t: 'grant'; task: TaskM; step: StepM; kind: Kind; n: number }
  | { t: 'admit'; task: TaskM };

/** The phases waiting for a dispatch limit, in a stable order. */
export function queued(w: World): { task: TaskM; step: StepM; kind: Kind; n: number }[] {
  const out: { task: TaskM; step: StepM; kind: Kind; n: number }[] = [];
  for (const task of tasks(w)) {
    for (const s of task.steps.values()) {
      for (const step of s.elements ?? [s]) {
        const kind = queuedPhase(task, step);
        if (kind) out.push({ task, step, kind, n: (kind === 'run' ? step.run : step.comp!).q!.n });
      }
    }
  }
  return out;
}

/**
 * The concrete target of an operation in the current state, or undefined when it has none (then the
 * operation is not applicable and is skipped). Pure: reads the world, changes nothing.
 */
export function resolve(w: World, op: Op): Resolved | undefined {
  const clock = w.model.clock;
  switch (op.t) {
    case 'submit':
      return w.model.tasks.size < MAX_TASKS ? { t: 'submit' } : undefined;
    case 'resubmit': {
      const task = pickOf(tasks(w), op.pick);
      return task && { t: 'resubmit', task };
    }
    case 'advance':
      return { t: 'advance' };
    case 'result': {
      const target = pickOf(answerable(w), op.pick);
      return target && { t: 'result', target };
    }
    case 'stale': {
      const target = pickOf(
        phases(w).filter((p) => p.attempt >= 2),
        op.pick,
      );
      return target && { t: 'stale', target, attempt: target.attempt - 1 - (op.back % (target.attempt - 1)) };
    }
    case 'duplicate': {
      const result = pickOf(w.history, op.pick);
      return result && { t: 'duplicate', result };
    }
    case 'unstarted': {
      const all = phases(w).filter((p) => p.kind === 'run');
      const base = pickOf(all, op.pick);
      if (!base) return undefined;
      const attempt = (op.kind === 'run' ? base.step.run.attempt : (base.step.comp?.attempt ?? 0)) + 1 + op.ahead;
      return { t: 'unstarted', target: { ...base, kind: op.kind }, attempt };
    }
    case 'forged': {
      const target = pickOf(answerable(w), op.pick);
      return target && { t: 'forged', target, agentType: forgedType(target, op.by) };
    }
    case 'expire': {
      if (op.when === 'now') {
        const any = pickOf(
          phases(w).filter((p) => p.kind === 'run'),
          op.pick,
        );
        return any && { t: 'expire', taskId: any.task.id, step: any.step.spec.name, now: clock - op.lag };
      }
      // A notice is delivered, never expired (the `notice` op, and sweeps).
      const e = pickOf(
        indexed(w).filter((x) => x.step !== '#task' && x.step !== '#parent' && x.step !== '#admit'),
        op.pick,
      );
      if (!e) return undefined;
      return { t: 'expire', taskId: e.taskId, step: e.step, now: op.when === 'due' ? Math.max(clock, e.score) : Math.min(clock, e.score - 1) };
    }
    case 'expireTask': {
      const withDeadline = tasks(w).filter((t) => op.when === 'now' || (t.status === 'running' && t.deadlineAt !== undefined));
      const task = pickOf(withDeadline, op.pick);
      if (!task) return undefined;
      if (op.when === 'now') return { t: 'expireTask', taskId: task.id, now: clock };
      const at = task.deadlineAt!;
      return { t: 'expireTask', taskId: task.id, now: op.when === 'due' ? Math.max(clock, at) : Math.min(clock, at - 1) };
    }
    case 'sweep':
      return { t: 'sweep' };
    case 'takeover':
      return { t: 'takeover' };
    case 'deposed': {
      if (w.model.epoch < 2) return undefined;
      const e = pickOf(indexed(w), op.pick);
      return e && { t: 'deposed', taskId: e.taskId, step: e.step, now: Math.max(clock, e.score) };
    }
    case 'retry': {
      const retryable = (t: TaskM) => t.status === 'failed' || t.status === 'compensation_failed' || [...t.steps.values()].some((s) => s.status === 'parked');
      const task = pickOf(
        tasks(w).filter((t) => op.any || retryable(t)),
        op.pick,
      );
      return task && { t: 'task', task };
    }
    case 'cancel': {
      const task = pickOf(tasks(w), op.pick);
      return task && { t: 'task', task };
    }
    case 'resend': {
      const task = pickOf(tasks(w), op.pick);
      return task && { t: 'task', task };
    }
    case 'publishAlerts':
      return { t: 'publishAlerts' };
    case 'grant': {
      const q = pickOf(queued(w), op.pick);
      if (!q || (op.old && q.n < 2)) return undefined;
      return { t: 'grant', ...q, n: op.old ? q.n - 1 : q.n };
    }
    case 'notice': {
      const n = pickOf(
        indexed(w).filter((x) => x.step === '#parent'),
        op.pick,
      );
      return n && { t: 'notice', taskId: n.taskId };
    }
    case 'admit': {
      const task = pickOf(
        tasks(w).filter((t) => t.admitAt !== undefined),
        op.pick,
      );
      return task && { t: 'admit', task };
    }
    case 'signal': {
      // Mostly to a task that waits for signals (the others only refuse them).
      const waiting = tasks(w).filter((t) => t.spec.steps.some((s) => s.waitFor));
      const task = pickOf(waiting.length > 0 && op.name === 'waited' ? waiting : tasks(w), op.pick);
      return task && { t: 'task', task };
    }
  }
}

// ------------------------------------------------------------------ arbitraries

const effectArb = fc.constantFrom<'none' | 'unknown'>('none', 'unknown');

/** A success; sometimes with a total a condition reads (decision 0019's when-output shape). */
const okArb: fc.Arbitrary<ResultOutcome> = fc.constantFrom<ResultOutcome>({ type: 'ok' }, { type: 'ok' }, { type: 'ok', total: 50 }, { type: 'ok', total: 150 });

export const outcomeArb: fc.Arbitrary<ResultOutcome> = fc.oneof(
  { arbitrary: okArb, weight: 4 },
  { arbitrary: fc.record({ type: fc.constant('permanent' as const), effect: effectArb }), weight: 1 },
  { arbitrary: fc.record({ type: fc.constant('retryable' as const), effect: effectArb }), weight: 2 },
  { arbitrary: fc.record({ type: fc.constant('circuit_open' as const), effect: effectArb, retryAfterMs: fc.constantFrom(50, 200, 800) }), weight: 2 },
  { arbitrary: fc.record({ type: fc.constant('throttled' as const), effect: effectArb, retryAfterMs: fc.constantFrom(0, 200, 1_000) }), weight: 1 },
);

const ladderArb = fc.tuple(fc.integer({ min: 0, max: 2 }), fc.constantFrom(100, 300), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 2 }));

const choiceArb: fc.Arbitrary<PlanChoice> = fc
  .record({
    shape: fc.integer({ min: 0, max: SHAPES.length - 1 }),
    run: ladderArb,
    comp: ladderArb,
    giveUpMs: fc.option(fc.constantFrom(250, 600), { nil: undefined }),
    compGiveUpMs: fc.option(fc.constantFrom(200, 500), { nil: undefined }),
    amount: fc.option(fc.constantFrom(10, 1000, 2000), { nil: undefined }),
    remindIn: fc.option(fc.constantFrom<number | 'soon'>(-100, 150, 600, 5_000, 'soon'), { nil: undefined }),
    items: fc.option(fc.constantFrom<number | 'none'>(0, 1, 2, 3, 3, 4, 'none'), { nil: undefined }),
  })
  .map((c) => {
    const out: PlanChoice = { shape: c.shape, run: c.run, comp: c.comp };
    if (c.amount !== undefined) out.amount = c.amount;
    if (c.remindIn !== undefined) out.remindIn = c.remindIn;
    if (c.items !== undefined) out.items = c.items;
    if (c.giveUpMs !== undefined) out.giveUpMs = c.giveUpMs;
    if (c.compGiveUpMs !== undefined) out.compGiveUpMs = c.compGiveUpMs;
    return out;
  });

/** Mostly published; sometimes the writer crashed right after its Redis write. */
const publishArb = fc.constantFrom(true, true, true, true, false);
/** Mostly the current clock; sometimes an actor whose clock is behind. */
const lagArb = fc.constantFrom(0, 0, 0, 40);
const pickArb = fc.nat({ max: 50 });
const whenArb = fc.constantFrom<When>('due', 'due', 'early', 'now');
/** A few clients and agent instances, so the store's record of who submitted and who answered is checked by value. */
const clientArb = fc.nat({ max: 2 });
const agentArb = fc.nat({ max: 2 });

/** Each arbitrary with its weight (fast-check picks uniformly among the list, so weights repeat entries). */
export const OP_ARBS: [fc.Arbitrary<Op>, number][] = [
  [fc.record({ t: fc.constant('submit' as const), choice: choiceArb, publish: publishArb, client: clientArb }), 3],
  [fc.record({ t: fc.constant('resubmit' as const), pick: pickArb, client: clientArb }), 1],
  [fc.record({ t: fc.constant('advance' as const), ms: fc.constantFrom(1, 40, 100, 300, 1_000) }), 3],
  [fc.record({ t: fc.constant('result' as const), pick: pickArb, outcome: outcomeArb, lag: lagArb, publish: publishArb, agent: agentArb }), 8],
  [fc.record({ t: fc.constant('stale' as const), pick: pickArb, back: pickArb, outcome: outcomeArb }), 1],
  [fc.record({ t: fc.constant('duplicate' as const), pick: pickArb }), 2],
  [fc.record({ t: fc.constant('unstarted' as const), pick: pickArb, kind: fc.constantFrom<Kind>('run', 'compensate'), ahead: fc.nat({ max: 5 }), outcome: outcomeArb }), 1],
  [fc.record({ t: fc.constant('forged' as const), pick: pickArb, by: fc.constantFrom<ForgedBy>('other-step', 'other-phase', 'stranger'), outcome: outcomeArb }), 2],
  [fc.record({ t: fc.constant('expire' as const), pick: pickArb, when: whenArb, lag: lagArb, publish: publishArb }), 4],
  [fc.record({ t: fc.constant('expireTask' as const), pick: pickArb, when: whenArb, publish: publishArb }), 1],
  [fc.record({ t: fc.constant('sweep' as const), publish: publishArb }), 3],
  [fc.constant<Op>({ t: 'takeover' }), 1],
  [fc.record({ t: fc.constant('deposed' as const), pick: pickArb }), 1],
  [fc.record({ t: fc.constant('retry' as const), pick: pickArb, step: fc.option(fc.nat({ max: 3 }), { nil: null }), any: fc.constantFrom(false, false, true), lag: lagArb, publish: publishArb }), 2],
  [fc.record({ t: fc.constant('cancel' as const), pick: pickArb, lag: lagArb, publish: publishArb }), 1],
  [fc.record({ t: fc.constant('resend' as const), pick: pickArb }), 2],
  [fc.constant<Op>({ t: 'publishAlerts' }), 1],
  [fc.record({ t: fc.constant('grant' as const), pick: pickArb, late: fc.constantFrom(false, false, false, true), old: fc.constantFrom(false, false, false, true), lag: lagArb, publish: publishArb }), 4],
  [fc.record({ t: fc.constant('notice' as const), pick: pickArb, takeover: fc.constantFrom<'none' | 'taken' | 'ended'>('none', 'none', 'taken', 'ended') }), 2],
  [fc.record({ t: fc.constant('signal' as const), pick: pickArb, name: fc.constantFrom<'waited' | 'other'>('waited', 'waited', 'waited', 'other'), id: fc.nat({ max: 2 }), data: fc.nat({ max: 9 }) }), 4],
];

/** The admission runs' operations (decision 0024): every operation above, and the start of an admitted task. */
export const ADMISSION_OP_ARBS: [fc.Arbitrary<Op>, number][] = [
  ...OP_ARBS,
  [fc.record({ t: fc.constant('admit' as const), pick: pickArb, by: fc.constantFrom<'scheduler' | 'supervisor'>('scheduler', 'scheduler', 'supervisor'), publish: fc.boolean() }), 3],
];
