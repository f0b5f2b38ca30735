// A pure reference model of the task/step state machine, written from decisions 0009 and 0010 (and
// 0001/0007), not from the Lua: the model-based test runs it side by side with the real transitions and
// compares.
import { evaluate } from '@triad/core';
import type { Predicate } from '@triad/protocol';
// Where the decisions leave a detail open, the comment at that spot says so and how it was settled.

export type Effect = 'none' | 'unknown' | 'applied';
export type Kind = 'run' | 'compensate';
export type StepStatus =
  | 'pending'
  | 'processing'
  | 'parked'
  | 'processed'
  | 'failed'
  | 'error'
  | 'abandoned'
  | 'compensating'
  | 'compensated'
  | 'compensation_failed'
  /** Its `when` was false when it became ready (decision 0019 R1): done, no output, effect none. */
  | 'skipped'
  /** A durable sleep waits for `wakeAt` (decision 0019 R2): no agent, effect none. */
  | 'sleeping'
  /** A waitFor step waits for its signal until `timeoutAt` (decision 0019 R7): no agent, effect none. */
  | 'waiting'
  /** A run waits for a permit of its agent type's dispatch limit (decision 0020 §2): no attempt in flight. */
  | 'queued';
export type TaskStatus = 'running' | 'completed' | 'failed' | 'compensating' | 'compensated' | 'cancelled' | 'compensation_failed';
export type AlertKind = 'step_error' | 'step_failed' | 'compensation_failed' | 'task_deadline';

export const TERMINAL: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'compensated', 'cancelled', 'compensation_failed']);

/** A phase's policy: budget, ladder [retries r, longBackoffMs L, maxFailures m, maxCircuitOpen c], give-up g. */
export interface PhaseSpec {
  budgetMs: number;
  retries: number;
  longBackoffMs: number;
  maxFailures: number;
  maxCircuitOpen: number;
  giveUpAfterMs: number;
}

export interface StepSpec {
  name: string;
  dependsOn: string[];
  /** The agent type that runs the step: the only one whose result for the run is accepted (decision 0010). */
  agent: string;
  run: PhaseSpec;
  comp?: PhaseSpec & { agent: string };
  /** Its condition (decision 0019 §1.4): evaluated over the task input and the outputs when the step becomes ready. */
  when?: Predicate;
  /**
   * A durable sleep instead of an agent call (decision 0019 §2.4 R2–R5): a fixed time, or the epoch ms
   * at an input field, at most maxMs ahead. Its `agent` is '' (no agent may answer it) and its run phase
   * is never started.
   */
  sleep?: { ms: number } | { field: string; maxMs: number };
  /** A wait for a signal (decision 0019 §3), with its agent '' too. */
  waitFor?: { signal: string; timeoutMs: number };
  /**
   * A child task (decision 0019 §5), with its agent '' too: `spec` is the child workflow's (the runner
   * plays the scheduler and creates the child), `timeoutMs` cancels it when it runs too long.
   */
  child?: { workflow: string; spec: TaskSpec; timeoutMs?: number };
  /**
   * A fan-out over the task input's `items` (decision 0019 §4): the agent runs once per element, at most
   * maxParallel at once; more than maxItems elements, or no list, fails the step at its start.
   */
  forEach?: { maxParallel: number; maxItems: number };
}

/** A fan-out step's progress (decision 0019 §2.2 `fe`): elements are indexed 0 … n−1. */
export interface FanOut {
  n: number;
  /** The next index to start (elements start in index order). */
  next: number;
  /** One past the highest index ever started. */
  hi: number;
  /** Elements started and not ended (processing or parked), at most maxParallel. */
  live: number[];
  done: number;
  /** When the last element started: the undo's order key of a fan-out step that did not complete (U5). */
  lastStart?: number;
  /** During the step's undo: the elements to compensate, latest first, and how far that went. */
  undo?: number[];
  undoNext?: number;
  compRunning?: number;
  compFailed?: number;
}

export interface TaskSpec {
  steps: StepSpec[];
  onFailure: 'error' | 'compensate';
  deadlineMs?: number;
}

/** Decision 0009 §1: the default give-up time is the ladder's worst case, (m + c)·b + (max(0, m − r − 1) + c)·L. */
export function defaultGiveUpMs(b: number, r: number, L: number, m: number, c: number): number {
  return (m + c) * b + (Math.max(0, m - r - 1) + c) * L;
}

/** One phase of a step (its run, or its compensation): the same shape for both (decision 0009 §1). */
export interface Phase {
  attempt: number;
  failureCount: number;
  circuitCount: number;
  completeBy?: number;
  startedAt?: number;
  giveUpAt?: number;
  /** The phase waits (a long back-off or an open breaker); no attempt is in flight. */
  parked: boolean;
  /** The agent reported a retryable failure for the current attempt: it is over, the supervisor decides. */
  reported: boolean;
  /**
   * The agent instance whose result for the current attempt was applied (agents hold no claim: which
   * one ran an attempt is known from its result, decision 0010).
   */
  lockedBy?: string;
  /**
   * Waiting for a dispatch limit (decision 0020 §2.1): the queue count `n` (its ticket's last part), when
   * it began waiting, its check count and the time of its next check (its deadline member).
   */
  q?: { n: number; since: number; check: number; at: number };
  /** How many times the phase was queued (tickets are never reused). */
  qn?: number;
  /** Time spent waiting for limits, over every start. */
  waitedMs?: number;
}

export interface StepM {
  spec: StepSpec;
  status: StepStatus;
  run: Phase;
  comp?: Phase;
  effect: Effect;
  /** Completion counter, set when the run is processed. */
  order?: number;
  /** When the run was processed (the undo's order for processed steps). */
  processedAt?: number;
  /** The output of its last successful run (a condition may read it). */
  output?: unknown;
  /** Skipped: when, and why (the condition's reason). */
  skippedAt?: number;
  reason?: string;
  /** A wait: how many times it began to wait (its timeouts' alerts are `wait-<n>`), when it began, its timeout, the signal it took. */
  waits?: number;
  waitedAt?: number;
  timeoutAt?: number;
  signalId?: string;
  /** Failures at its start (a wake time that cannot be used): they name its alerts, `start-<n>`. */
  startFailures?: number;
  /** Sleeping: when it began and when it wakes; a sleep stopped by an undo: when. */
  sleptAt?: number;
  wakeAt?: number;
  abandonedAt?: number;
  /** A fan-out step: its progress and its elements (each a phase of its own, named `<step>#<i>`). */
  fe?: FanOut;
  elements?: StepM[];
  /** An element: its fan-out step and its index. */
  parent?: StepM;
  index?: number;
  /** A child step (decision 0019 §5): its child, the operation last asked of it, its check, how it ended. */
  child?: ChildM;
}

export type ChildOp = 'start' | 'cancel' | 'undo';

export interface ChildM {
  id: string;
  op: ChildOp;
  /** Operations sent so far (their commands' message ids differ). */
  sent: number;
  /** When the check sends the current operation again. */
  next: number;
  timeoutAt?: number;
  timedOut?: boolean;
  /** How the child ended, once its notice was delivered. */
  ended?: string;
}

/** A child task's link to its parent's step (decision 0019 §5.1); it only moves forward. */
export interface LinkM {
  parent: string;
  step: string;
  kind: Kind;
  attempt: number;
  holdUntil: number;
}

/** The child's id (decision 0019 §5.1; the model's ids are short). */
export function childIdOf(taskId: string, step: string, attempt: number): string {
  return `${taskId}:${step}:${attempt}`;
}

/** What a parent step's run may have done, by how its child ended (decision 0019 §5.4). */
const CHILD_EFFECT: Record<string, Effect> = { completed: 'applied', failed: 'unknown', compensation_failed: 'unknown', cancelled: 'none', compensated: 'none' };
export const CHILD_FIRST_CHECK_MS = 5_000;
export const CHILD_CHECK_MS = 60_000;

export interface Alert {
  id: string;
  kind: AlertKind;
  taskId: string;
  step?: string;
  /** A fan-out element's alert: its index (the step is its step's name; decision 0019 §4). */
  item?: number;
  failureCount: number;
  raisedAt: number;
}

export interface TaskM {
  id: string;
  /** The submitting client (decision 0010). */
  client: string;
  spec: TaskSpec;
  /** The task input, as submitted (conditions read it). */
  input: unknown;
  /** Every signal id accepted (decision 0019 §3.3) → its name and the step it went to ('' while kept). */
  signalIds: Map<string, { name: string; to: string }>;
  /** Signals kept until a step waits for them, oldest first, with their data. */
  signalQueue: { id: string; name: string; data: unknown }[];
  status: TaskStatus;
  endAs?: 'compensated' | 'cancelled';
  deadlineAt?: number;
  createdAt: number;
  /** The time of the task's last transition: no transition records an earlier time (decision 0009 §5). */
  updatedAt: number;
  finishedAt?: number;
  doneSeq: number;
  staleResults: number;
  /** Results that came from another agent type than the one the plan names for the phase (decision 0010). */
  forgedResults: number;
  steps: Map<string, StepM>;
  /** Steps whose compensation started, in order (for the order invariant). */
  compStarts: string[];
  /** Admission (decision 0024): `w` waiting, `a` admitted and not started (its `#admit` member at admitAt). */
  adm?: 'w' | 'a';
  admitAt?: number;
  /** A child task: its link; its pending notice (the score of `<id>|#parent`); its output once completed. */
  link?: LinkM;
  notice?: number;
  output?: unknown;
  /** What the last delivered notice said (`<kind>:<attempt>:<status>`). */
  notified?: string;
}

export interface Dispatch {
  taskId: string;
  step: string;
  /** The agent type the request goes to (and that alone may answer it). */
  agent: string;
  kind: Kind;
  attempt: number;
  completeBy: number;
  effect?: 'applied' | 'unknown';
  /** A fan-out element's request: how many elements the list has. */
  count?: number;
  /** A child step's operation on its child task (decision 0019 §5.2). */
  child?: ChildOp;
  childId?: string;
  sent?: number;
}

export type ExpireAction = 'retry' | 'park' | 'error' | 'compensate' | 'abandon' | 'wake' | 'requeue' | 'resend' | 'timeout' | 'admit';
/** What an applied signal did (decision 0019 §3.3), reported where an expiry reports its action. */
export type SignalAction = 'delivered' | 'buffered';

/** What a transition did: applied (with its dispatches and alerts), or rejected in one of the ways that write nothing. */
export type Outcome =
  | { code: 'applied'; dispatch: Dispatch[]; alerts: Alert[]; action?: ExpireAction | SignalAction; now: number }
  /** Fenced out: a result for an attempt that is not the running one. Only staleResults grows. */
  | { code: 'stale' }
  /** A result from another agent type than the phase's (decision 0010). Only forgedResults grows. */
  | { code: 'forged' }
  /** A supervisor write at an epoch older than the current one: nothing changes. */
  | { code: 'stale_epoch' }
  /** Nothing to do (not due, or nothing running): nothing written. */
  | { code: 'noop' }
  /** Not allowed in the task's state (an operator's cancel or retry): nothing written. */
  | { code: 'invalid' }
  /** startQueued too close to the granted complete-by (decision 0020 Q10): nothing written. */
  | { code: 'late' };

export type ResultOutcome =
  /** `total`: a field of the output a condition may read (absent: the output is { ok: true }). */
  | { type: 'ok'; total?: number }
  | { type: 'permanent'; effect: 'none' | 'unknown' }
  | { type: 'retryable'; effect: 'none' | 'unknown' }
  | { type: 'circuit_open'; effect: 'none' | 'unknown'; retryAfterMs: number }
  /** The service throttled the call (decision 0020 §5): until increment 5, parked per phase like a breaker refusal, on the same count. */
  | { type: 'throttled'; effect: 'none' | 'unknown'; retryAfterMs: number };

/**
 * The agent type whose result for a phase is accepted: the run's agent, or the compensation's (decision
 * 0010). A compensation result for a step that declares none is left open by the decision; settled from
 * the Lua: it is checked against the run's agent (and is then stale: no compensation runs).
 */
/** The output a successful run stores (the runner encodes the same object). */
export function okOutput(outcome: ResultOutcome): unknown {
  return outcome.type === 'ok' && outcome.total !== undefined ? { ok: true, total: outcome.total } : { ok: true };
}

/** The outputs a condition may read: those of the steps that ran to the end. */
function outputsOf(t: TaskM): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of t.steps.values()) if (s.output !== undefined) out[s.spec.name] = s.output;
  return out;
}

/** The step, or the fan-out element (`<step>#<i>`), a phase name denotes. */
export function phaseOwner(t: TaskM, name: string): StepM | undefined {
  const s = t.steps.get(name);
  if (s) return s;
  const m = /^(.+)#(\d+)$/.exec(name);
  return m ? t.steps.get(m[1]!)?.elements?.[Number(m[2])] : undefined;
}

export function expectedAgent(s: StepM, kind: Kind): string {
  return kind === 'compensate' && s.spec.comp ? s.spec.comp.agent : s.spec.agent;
}

const EFFECT_RANK: Record<Effect, number> = { none: 0, unknown: 1, applied: 2 };
/** What is known of a run's effect only moves up (decision 0009 §3). */
function raise(step: StepM, e: Effect): void {
  if (EFFECT_RANK[e] > EFFECT_RANK[step.effect]) step.effect = e;
}

function newPhase(): Phase {
  return { attempt: 0, failureCount: 0, circuitCount: 0, parked: false, reported: false };
}

/** The steps that may have taken effect and that an undo must compensate (decision 0009 §3). */
const UNDO_CANDIDATE: ReadonlySet<StepStatus> = new Set(['processed', 'abandoned', 'failed', 'error']);

/** A step whose run may be in flight at an agent: started, not parked, not reported. */
export function runInFlight(s: StepM): boolean {
  return s.status === 'processing' && !s.run.reported;
}

/** A compensation that is running (an attempt in flight or reported), not parked. */
export function compRunning(s: StepM): boolean {
  return s.status === 'compensating' && s.comp !== undefined && !s.comp.parked && s.comp.q === undefined;
}

/** The phase of a step that waits for a dispatch limit, if one does (decision 0020). */
export function queuedPhase(t: TaskM, s: StepM): Kind | undefined {
  if (t.status === 'running' && s.status === 'queued' && s.run.q) return 'run';
  if (t.status === 'compensating' && s.status === 'compensating' && s.comp?.q) return 'compensate';
  return undefined;
}

/** How long a queued phase's next check is after its check number `check` (decision 0020 §2.6: 10 s doubling, at most 5 min). */
export function checkDelay(check: number): number {
  return Math.min(10_000 * 2 ** (check - 1), 300_000);
}

/** A compensation attempt that may be in flight at an agent: running, not reported. */
export function compInFlight(s: StepM): boolean {
  return compRunning(s) && !s.comp!.reported;
}

/**
 * The undo's order key (decision 0009 §3): descending (time, rank, order); time = completion of a
 * processed step, last attempt's start of an in-doubt one; rank 1 for in-doubt (before a processed one
 * at the same millisecond); order breaks ties between processed steps.
 */
export function undoKey(s: StepM): [number, number, number] {
  if (s.status === 'processed') return [s.processedAt ?? 0, 0, s.order ?? 0];
  // A fan-out step that did not complete: by its last element's start (decision 0019 U5).
  return [s.fe?.lastStart ?? s.run.startedAt ?? 0, 1, 0];
}

export function compareUndo(a: StepM, b: StepM): number {
  const ka = undoKey(a);
  const kb = undoKey(b);
  for (let i = 0; i < 3; i++) {
    const d = (ka[i] ?? 0) - (kb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The steps an undo may compensate next, right now (all tied at the top of the order), or [] if none. */
export function nextCompensationCandidates(t: TaskM): StepM[] {
  // A child step is undone by undoing its child (decision 0019 U7).
  const all = [...t.steps.values()].filter((s) => (s.spec.comp !== undefined || s.spec.child !== undefined) && s.effect !== 'none' && UNDO_CANDIDATE.has(s.status));
  if (all.length === 0) return [];
  all.sort((a, b) => compareUndo(b, a));
  const top = all[0]!;
  return all.filter((s) => compareUndo(s, top) === 0);
}

/** A transition in progress: the task, the time it records, what it dispatches and the alerts it raises. */
interface Tx {
  t: TaskM;
  now: number;
  dispatch: Dispatch[];
  alerts: Alert[];
}

/** How long a scheduler has to start a task it admitted before the supervisor does (decision 0024). */
export const ADMIT_GRACE_MS = 5_000;

/** A client's admission in one bucket (decision 0024): its active tasks, those waiting (by arrival), its share. */
export interface AdmissionM {
  active: Set<string>;
  waiting: string[];
  share: number;
}


/** A task as createTask (or a child's start) stores it: running, every step pending, nothing counted yet. */
function newTask(id: string, client: string, spec: TaskSpec, input: unknown, now: number): TaskM {
  return {
    id,
    client,
    spec,
    input,
    signalIds: new Map(),
    signalQueue: [],
    status: 'running',
    createdAt: now,
    updatedAt: now,
    doneSeq: 0,
    staleResults: 0,
    forgedResults: 0,
    steps: new Map(spec.steps.map((s) => [s.name, { spec: s, status: 'pending', run: newPhase(), effect: 'none' }])),
    compStarts: [],
  };
}
export class Model {
  clock: number;
  /** The supervisor leader epoch in Redis. */
  epoch = 1;
  readonly tasks = new Map<string, TaskM>();
  readonly openAlerts = new Map<string, Alert>();
  outbox: Alert[] = [];
  /**
   * Two in-doubt steps that started in the same millisecond are tied in the undo's order, which the
   * decision leaves open: the model accepts either. The runner sets this to read the real system's
   * choice; the invariants check it was one of the tied candidates.
   */
  chooseTie: (t: TaskM, tied: StepM[]) => StepM = (_t, tied) => tied[0]!;

  /** The agent types whose phases wait for a dispatch limit instead of starting (decision 0020; fixed per run). */
  readonly limited: ReadonlySet<string>;

  /** Admission (decision 0024): per `<bucket>|<client>`; `share` 0 = off (tasks are never counted). */
  readonly admission = new Map<string, AdmissionM>();

  constructor(
    now: number,
    limited: readonly string[] = [],
    readonly share = 0,
    private readonly bucketOf: (taskId: string) => number = () => 0,
  ) {
    this.clock = now;
    this.limited = new Set(limited);
  }

  private admissionOf(t: TaskM): AdmissionM {
    const key = `${this.bucketOf(t.id)}|${t.client}`;
    let a = this.admission.get(key);
    if (!a) this.admission.set(key, (a = { active: new Set(), waiting: [], share: 0 }));
    return a;
  }

  task(id: string): TaskM {
    const t = this.tasks.get(id);
    if (!t) throw new Error(`model: no task ${id}`);
    return t;
  }

  // ---------------------------------------------------------------- transitions

  create(id: string, client: string, spec: TaskSpec, now: number, input: unknown = {}, link?: LinkM): Outcome {
    const t = newTask(id, client, spec, input, now);
    if (link) t.link = link;
    if (spec.deadlineMs !== undefined) t.deadlineAt = now + spec.deadlineMs;
    this.tasks.set(id, t);
    const tx = this.tx(t, now);
    // Admission (decision 0024; createTask only, not a child's start): over the client's share in the
    // task's bucket, it is stored and waits, in arrival order, and nothing starts.
    if (this.share > 0 && !link) {
      const a = this.admissionOf(t);
      if (a.active.size >= this.share) {
        a.waiting.push(id);
        // The queue is a zset by createdAt: ties in member order.
        a.waiting.sort((x, y) => this.task(x).createdAt - this.task(y).createdAt || (x < y ? -1 : x > y ? 1 : 0));
        a.share = this.share;
        t.adm = 'w';
        return this.applied(tx);
      }
      a.active.add(id);
    }
    this.startReady(tx);
    return this.applied(tx);
  }

  /**
   * admitTask.lua (decision 0024): an admitted task (its `#admit` member) starts its ready steps, once; any
   * other state drops the member and starts nothing. `bySupervisor`: fenced by `epoch` instead of the lease.
   */
  admit(taskId: string, now: number, bySupervisor: boolean, epoch = this.epoch): Outcome {
    const t = this.task(taskId);
    if (bySupervisor && epoch < this.epoch) return { code: 'stale_epoch' };
    if (t.adm !== 'a' || t.status !== 'running') {
      // Not to be started (ended since it was admitted, or started already): only its member goes — the
      // runner counts that as applied with nothing sent (the script answers INVALID_STATE).
      if (t.admitAt === undefined) return { code: 'noop' };
      t.admitAt = undefined;
      return { code: 'applied', dispatch: [], alerts: [], now };
    }
    t.adm = undefined;
    t.admitAt = undefined;
    const tx = this.tx(t, now);
    this.startReady(tx);
    return this.applied(tx, bySupervisor ? 'admit' : undefined);
  }

  /**
   * An agent's result for one attempt of a phase (decision 0009 §1 table; §3 drains; 0001 fencing),
   * sent by the instance `agentId` on the result subject of `agentType` (decision 0010).
   */
  result(taskId: string, step: string, kind: Kind, attempt: number, outcome: ResultOutcome, now: number, agentType: string, agentId: string): Outcome {
    const t = this.task(taskId);
    const s = phaseOwner(t, step);
    if (!s) return { code: 'invalid' };
    // Only the agent type the plan names for the phase may report it, whatever the attempt (decision 0010);
    // a step that calls no agent (a sleep) no one may.
    if (s.spec.agent === '' || agentType !== expectedAgent(s, kind)) {
      t.forgedResults++;
      return { code: 'forged' };
    }
    // A fan-out step's results are its elements': one that names no element is stale (decision 0019 §4).
    if (s.spec.forEach) return this.stale(t);
    // Fencing (0001): only the running attempt of the phase; a duplicate of a result already applied
    // (a reported failure included: that attempt is over) is stale.
    let drain = false;
    if (kind === 'compensate') {
      if (t.status !== 'compensating' || !compRunning(s) || s.comp!.attempt !== attempt || s.comp!.reported) return this.stale(t);
    } else {
      if (t.status !== 'running' && t.status !== 'compensating') return this.stale(t);
      if (s.status !== 'processing' || s.run.attempt !== attempt || s.run.reported) return this.stale(t);
      drain = t.status === 'compensating';
    }
    const tx = this.tx(t, now);
    const ph = kind === 'run' ? s.run : s.comp!;
    ph.lockedBy = agentId;
    if (kind === 'run' && outcome.type !== 'ok') raise(s, outcome.effect);

    if (outcome.type === 'ok' && kind === 'compensate') {
      s.status = 'compensated';
      if (s.parent) {
        // An element's compensation (U5): the next ones start; the undo moves on once the step's are done.
        s.parent.fe!.compRunning!--;
        if (this.compFill(tx, s.parent) && s.parent.status === 'compensated') this.nextCompensation(tx);
      } else this.nextCompensation(tx);
    } else if (outcome.type === 'ok') {
      s.status = 'processed';
      s.processedAt = tx.now;
      s.output = okOutput(outcome);
      raise(s, 'applied');
      s.order = ++t.doneSeq;
      if (s.parent) {
        // An element (R12): the next ones start; the last one completes the step (output: theirs, in order).
        const parent = s.parent;
        this.elementLeft(s);
        parent.fe!.done++;
        if (drain) {
          this.settle(tx, parent);
          this.nextCompensation(tx);
        } else if (parent.status === 'processing') {
          this.fill(tx, parent);
          if (parent.fe!.done === parent.fe!.n) {
            this.completeFanOut(tx, parent);
            this.startReady(tx);
          }
        }
      }
      // A drain: processed, output kept, nothing downstream starts; the undo goes on.
      else if (drain) this.nextCompensation(tx);
      else this.startReady(tx);
    } else if (drain) {
      this.abandonDrain(tx, s);
    } else if (outcome.type === 'throttled' && !s.parent && this.limited.has(expectedAgent(s, kind))) {
      // Decision 0020 Q6: the limiter pauses (not modelled here: limits-model.test.ts) and the phase goes
      // back in line, a refusal on maxCircuitOpen; past it a retryable failure.
      ph.circuitCount++;
      if (ph.circuitCount <= this.phaseSpec(s, kind).maxCircuitOpen) this.start(tx, s, kind);
      else this.report(tx, ph);
    } else if (outcome.type === 'circuit_open' || outcome.type === 'throttled') {
      ph.circuitCount++;
      if (ph.circuitCount <= this.phaseSpec(s, kind).maxCircuitOpen) {
        this.park(tx, s, kind, Math.min(tx.now + outcome.retryAfterMs, ph.giveUpAt ?? Infinity));
      } else {
        this.report(tx, ph);
      }
    } else if (outcome.type === 'permanent') {
      this.giveUp(tx, s, kind, true);
    } else {
      this.report(tx, ph);
    }
    return this.applied(tx);
  }

  /** The supervisor's expiry of one step's deadline (decision 0009 §1 table, ladder; §3 drain). */
  expireStep(taskId: string, step: string, now: number, epoch: number): Outcome {
    if (epoch < this.epoch) return { code: 'stale_epoch' };
    const t = this.tasks.get(taskId);
    const s = t && phaseOwner(t, step);
    if (!t || !s) return { code: 'noop' };
    // A fan-out step has no deadline of its own: its elements do.
    if (s.fe) return { code: 'noop' };
    // A child step's check (decision 0019 R16, R17): its current operation again, or past its timeout a cancel.
    const c = s.child;
    if (c && !c.ended && ((t.status === 'running' && s.status === 'waiting') || (t.status === 'compensating' && (s.status === 'waiting' || s.status === 'compensating')) || (t.status === 'failed' && s.status === 'abandoned'))) {
      const timesOut = c.op === 'start' && c.timeoutAt !== undefined && !c.timedOut;
      const due = timesOut ? Math.min(c.next, c.timeoutAt!) : c.next;
      if (due > now) return { code: 'noop' };
      const tx = this.tx(t, now);
      const kind: Kind = s.status === 'compensating' ? 'compensate' : 'run';
      if (timesOut && c.timeoutAt! <= now) {
        c.op = 'cancel';
        c.timedOut = true;
        this.childCheck(tx, s, CHILD_FIRST_CHECK_MS);
        this.childDispatch(tx, s, kind);
        return this.applied(tx, 'timeout');
      }
      this.childCheck(tx, s, CHILD_CHECK_MS);
      this.childDispatch(tx, s, kind);
      return this.applied(tx, 'resend');
    }
    // A sleep's deadline (decision 0019 R5): at its time it is done and what it made ready starts; before
    // it, nothing changes (the index keeps it at its time).
    if (t.status === 'running' && s.status === 'sleeping') {
      if (s.wakeAt! > now) return { code: 'noop' };
      const tx = this.tx(t, now);
      this.completeWithoutAgent(tx, s);
      this.startReady(tx);
      return this.applied(tx, 'wake');
    }
    // A wait's timeout (R9): the step gives up (error) and the task follows its onFailure.
    if (t.status === 'running' && s.status === 'waiting') {
      if (s.timeoutAt! > now) return { code: 'noop' };
      const tx = this.tx(t, now);
      delete s.timeoutAt;
      return this.applied(tx, this.giveUp(tx, s, 'run', false, `wait-${s.waits ?? 1}`));
    }
    // A phase waiting for a limit (decision 0020 Q7): its check — not a failure; nothing but the check moves,
    // and the task's last-transition time is not touched (the check only re-sends its ticket).
    const qk = queuedPhase(t, s);
    if (qk) {
      const q = (qk === 'run' ? s.run : s.comp!).q!;
      if (q.at > now) return { code: 'noop' };
      q.check++;
      q.at = Math.max(now, t.updatedAt) + checkDelay(q.check);
      return { code: 'applied', dispatch: [], alerts: [], action: 'requeue', now: Math.max(now, t.updatedAt) };
    }
    let kind: Kind;
    let drain = false;
    if (t.status === 'running' && (s.status === 'processing' || s.status === 'parked')) kind = 'run';
    else if (t.status === 'compensating' && s.status === 'processing') {
      kind = 'run';
      drain = true;
    } else if (t.status === 'compensating' && s.status === 'compensating') kind = 'compensate';
    else return { code: 'noop' };
    const ph = kind === 'run' ? s.run : s.comp!;
    // "Passed" is judged on the caller's clock; the time recorded is never before the last transition.
    if (ph.completeBy !== undefined && ph.completeBy > now) return { code: 'noop' };
    const tx = this.tx(t, now);
    let action: ExpireAction;
    if (drain) {
      // Its expiry → abandoned, effect unknown: no result came, an agent may have run it (0009 §3 as
      // revised by 0010 — agents hold no claim, so nothing says no agent started it).
      raise(s, 'unknown');
      this.abandonDrain(tx, s);
      action = 'abandon';
    } else if (ph.parked) {
      // Expiry of a park: retry, unless now ≥ giveUpAt (then give up).
      if (ph.giveUpAt !== undefined && tx.now >= ph.giveUpAt) action = this.giveUp(tx, s, kind, false);
      else {
        this.start(tx, s, kind);
        action = 'retry';
      }
    } else {
      ph.failureCount++;
      // An attempt that never reported may have reached the service (decision 0010: always in doubt).
      if (kind === 'run' && !ph.reported) raise(s, 'unknown');
      action = this.ladder(tx, s, kind);
    }
    return this.applied(tx, action);
  }

  /** The supervisor's expiry of a task's own deadline (decision 0009 §2). */
  expireTask(taskId: string, now: number, epoch: number): Outcome {
    if (epoch < this.epoch) return { code: 'stale_epoch' };
    const t = this.tasks.get(taskId);
    if (!t || t.status !== 'running' || t.deadlineAt === undefined || t.deadlineAt > now) return { code: 'noop' };
    const tx = this.tx(t, now);
    let action: ExpireAction;
    if (t.spec.onFailure === 'compensate') {
      this.beginUndo(tx, 'compensated');
      action = 'compensate';
    } else {
      this.stopInFlight(tx);
      this.finish(tx, 'failed');
      // The decision names no failure count for a task's own deadline: 0 (settled from the Lua); its
      // attempt is 0 (0009 §4).
      this.alert(tx, 'task_deadline', undefined, 0, 0);
      action = 'error';
    }
    return this.applied(tx, action);
  }

  /** An operator's cancel: only a running task; it is undone and ends cancelled (0007, 0009 §3). */
  cancel(taskId: string, now: number): Outcome {
    const t = this.task(taskId);
    if (t.status !== 'running') return { code: 'invalid' };
    const tx = this.tx(t, now);
    this.beginUndo(tx, 'cancelled');
    return this.applied(tx);
  }

  /**
   * An operator's retry (failed | compensation_failed → running | compensating; decision 0009 state
   * machine). The decision leaves the details to retryStep; settled with the lead: a failed compensation
   * of a compensation_failed task restarts that compensation with a fresh budget. A run retry names a
   * failed/error/parked step (or one abandoned when its task failed); in a FAILED task it restarts every
   * step the task stopped — its failed/error step and the abandoned ones — whichever is named (leaving one
   * stopped would leave a running task with nothing to run); in a running task only the named (parked)
   * step. Each restarted step gets a fresh budget; the task's open alerts close. Only the retry of a
   * failed task lifts the task deadline (0009 §2 says so for a task failed by its deadline; a running
   * task keeps its own).
   */
  retry(taskId: string, step: string | undefined, now: number): Outcome {
    const t = this.task(taskId);
    if (t.status !== 'running' && t.status !== 'failed' && t.status !== 'compensation_failed') return { code: 'invalid' };
    const steps = [...t.steps.values()];
    const target =
      step !== undefined
        ? t.steps.get(step)
        : steps.find((s) => (t.status === 'compensation_failed' ? s.status === 'compensation_failed' : s.status === 'failed' || s.status === 'error'));
    if (!target) return { code: 'invalid' };
    const compensation = target.status === 'compensation_failed' && t.status === 'compensation_failed';
    if (!compensation) {
      if (t.status === 'compensation_failed') return { code: 'invalid' };
      const ok = target.status === 'failed' || target.status === 'error' || target.status === 'parked' || (target.status === 'abandoned' && t.status === 'failed');
      if (!ok) return { code: 'invalid' };
    }
    const tx = this.tx(t, now);
    // Its open alerts close first: a step that fails again at its start raises a new one, which stands.
    for (const id of [...this.openAlerts.keys()]) if (id.startsWith(`${t.id}:`)) this.openAlerts.delete(id);
    const fresh = (ph: Phase): void => {
      ph.failureCount = 0;
      ph.circuitCount = 0;
      delete ph.giveUpAt;
    };
    if (compensation && target.fe) {
      // A fan-out step (U6): its failed element compensations again, fresh, then those not started.
      const fe = target.fe;
      const again: number[] = [];
      for (const i of fe.undo ?? []) {
        const e = target.elements![i]!;
        if (e.status === 'compensation_failed') {
          fresh(e.comp!);
          again.push(i);
        }
      }
      again.push(...(fe.undo ?? []).slice(fe.undoNext ?? 0));
      fe.undo = again;
      fe.undoNext = 0;
      fe.compFailed = 0;
      fe.compRunning = 0;
      target.status = 'compensating';
      t.status = 'compensating';
      this.compFill(tx, target);
    } else if (compensation && target.spec.child) {
      fresh(target.comp!);
      this.childUndo(tx, target);
      t.status = 'compensating';
    } else if (compensation) {
      fresh(target.comp!);
      this.start(tx, target, 'compensate');
      t.status = 'compensating';
    } else {
      const failedTask = t.status === 'failed';
      const stopped = (s: StepM) => s.status === 'failed' || s.status === 'error' || s.status === 'abandoned';
      for (const s of steps) {
        if (s === target || (failedTask && stopped(s))) {
          fresh(s.run);
          s.status = 'pending';
        }
      }
      t.status = 'running';
      delete t.finishedAt;
      if (failedTask) delete t.deadlineAt;
      // Readiness may complete the task at once (the step is skipped now).
      this.startReady(tx);
    }
    if (t.status === 'compensating') delete t.finishedAt;
    return this.applied(tx);
  }

  /** The leader supervisor published the outbox (decision 0009 §4). */
  published(): void {
    this.outbox = [];
  }

  // ---------------------------------------------------------------- helpers

  phaseSpec(s: StepM, kind: Kind): PhaseSpec {
    const sp = kind === 'run' ? s.spec.run : s.spec.comp;
    if (!sp) throw new Error(`model: step ${s.spec.name} has no ${kind} phase`);
    return sp;
  }

  private tx(t: TaskM, now: number): Tx {
    const eff = Math.max(now, t.updatedAt);
    t.updatedAt = eff;
    return { t, now: eff, dispatch: [], alerts: [] };
  }

  private applied(tx: Tx, action?: ExpireAction | SignalAction): Outcome {
    const out: Outcome = { code: 'applied', dispatch: tx.dispatch, alerts: tx.alerts, now: tx.now };
    if (action !== undefined) out.action = action;
    return out;
  }

  private stale(t: TaskM): Outcome {
    t.staleResults++;
    return { code: 'stale' };
  }

  /**
   * Start of a phase — or, when its agent type is limited (decision 0020 §2.2; fan-out elements are not
   * limited yet), its wait for a permit: queued with a new ticket and a check in 10 s, nothing else moves.
   */
  private start(tx: Tx, s: StepM, kind: Kind): void {
    if (this.limited.has(expectedAgent(s, kind))) {
      const ph = kind === 'run' ? s.run : (s.comp ??= newPhase());
      ph.qn = (ph.qn ?? 0) + 1;
      ph.q = { n: ph.qn, since: tx.now, check: 1, at: tx.now + checkDelay(1) };
      ph.parked = false;
      s.status = kind === 'run' ? 'queued' : 'compensating';
      return;
    }
    this.begin(tx, s, kind, tx.now + this.phaseSpec(s, kind).budgetMs);
  }

  /**
   * startQueued (decision 0020 Q4, Q10, Q11): a phase that still waits with ticket `n` starts with the
   * granted complete-by, its give-up time moved by the wait; too late → late; else stale (nothing counted).
   */
  startQueued(taskId: string, step: string, kind: Kind, n: number, completeBy: number, now: number): Outcome {
    const t = this.task(taskId);
    const s = phaseOwner(t, step);
    if (!s || queuedPhase(t, s) !== kind) return { code: 'stale' };
    const ph = kind === 'run' ? s.run : s.comp!;
    if (ph.q!.n !== n) return { code: 'stale' };
    // Too late: less than 100 ms — or half the budget, when that is shorter — left before the granted complete-by.
    if (Math.max(now, t.updatedAt) >= completeBy - Math.min(100, Math.floor(this.phaseSpec(s, kind).budgetMs / 2))) return { code: 'late' };
    const tx = this.tx(t, now);
    const waited = Math.max(0, tx.now - ph.q!.since);
    if (ph.giveUpAt !== undefined) ph.giveUpAt += waited;
    ph.waitedMs = (ph.waitedMs ?? 0) + waited;
    delete ph.q;
    this.begin(tx, s, kind, completeBy);
    return this.applied(tx);
  }

  /** An attempt begins: attempt+1, completeBy (now + b, or a grant's), giveUpAt = now + g on the first start. */
  private begin(tx: Tx, s: StepM, kind: Kind, completeBy: number): void {
    const sp = this.phaseSpec(s, kind);
    const ph = kind === 'run' ? s.run : (s.comp ??= newPhase());
    ph.attempt++;
    ph.completeBy = completeBy;
    ph.startedAt = tx.now;
    ph.parked = false;
    ph.reported = false;
    delete ph.lockedBy;
    ph.giveUpAt ??= tx.now + sp.giveUpAfterMs;
    s.status = kind === 'run' ? 'processing' : 'compensating';
    const d: Dispatch = { taskId: tx.t.id, step: s.spec.name, agent: expectedAgent(s, kind), kind, attempt: ph.attempt, completeBy: ph.completeBy };
    if (s.parent) d.count = s.parent.fe!.n;
    if (kind === 'compensate') {
      d.effect = s.effect === 'applied' ? 'applied' : 'unknown';
      tx.t.compStarts.push(s.spec.name);
    }
    tx.dispatch.push(d);
  }

  private park(tx: Tx, s: StepM, kind: Kind, until: number): void {
    const ph = kind === 'run' ? s.run : s.comp!;
    ph.completeBy = until;
    ph.parked = true;
    ph.reported = false;
    if (kind === 'run') s.status = 'parked';
  }

  /** A retryable failure reported inside the window: completeBy = now, the supervisor's next sweep decides. */
  private report(tx: Tx, ph: Phase): void {
    ph.completeBy = tx.now;
    ph.reported = true;
  }

  /** The ladder after a counted failure, first match wins (decision 0009 §1). */
  private ladder(tx: Tx, s: StepM, kind: Kind): ExpireAction {
    const sp = this.phaseSpec(s, kind);
    const ph = kind === 'run' ? s.run : s.comp!;
    const giveUpAt = ph.giveUpAt ?? Infinity;
    if (ph.failureCount >= sp.maxFailures || tx.now >= giveUpAt) return this.giveUp(tx, s, kind, false);
    if (ph.failureCount <= sp.retries) {
      this.start(tx, s, kind);
      return 'retry';
    }
    if (tx.now + sp.longBackoffMs >= giveUpAt) return this.giveUp(tx, s, kind, false);
    this.park(tx, s, kind, tx.now + sp.longBackoffMs);
    return 'park';
  }

  /**
   * Giving up (decision 0009 §1): a run becomes error (permanent: failed) and the task follows its
   * policy; a compensation becomes compensation_failed and so does the task, with an alert.
   */
  private giveUp(tx: Tx, s: StepM, kind: Kind, permanent: boolean, alertAttempt?: string): ExpireAction {
    if (s.parent && kind === 'compensate') {
      // An element's compensation gives up (U6): no other element's starts; the step and the task end
      // compensation_failed once none of the step's runs (with its alert, then).
      const ph = s.comp!;
      ph.parked = false;
      ph.reported = false;
      s.status = 'compensation_failed';
      const fe = s.parent.fe!;
      fe.compRunning!--;
      fe.compFailed = (fe.compFailed ?? 0) + 1;
      this.compFill(tx, s.parent);
      return 'error';
    }
    if (s.parent) {
      // An element gives up (R13): so does its step, and the task follows its onFailure.
      s.status = permanent ? 'failed' : 'error';
      s.run.parked = false;
      s.run.reported = false;
      const parent = s.parent;
      this.elementLeft(s);
      parent.status = s.status;
      if (tx.t.spec.onFailure === 'compensate') {
        this.beginUndo(tx, 'compensated');
        return 'compensate';
      }
      this.stopInFlight(tx);
      this.finish(tx, 'failed');
      this.alert(tx, permanent ? 'step_failed' : 'step_error', s.spec.name, s.run.failureCount, alertAttempt ?? s.run.attempt);
      return 'error';
    }
    if (kind === 'compensate') {
      const ph = s.comp!;
      ph.parked = false;
      ph.reported = false;
      s.status = 'compensation_failed';
      this.finish(tx, 'compensation_failed');
      this.alert(tx, 'compensation_failed', s.spec.name, ph.failureCount, ph.attempt);
      return 'error';
    }
    s.status = permanent ? 'failed' : 'error';
    s.run.parked = false;
    s.run.reported = false;
    if (tx.t.spec.onFailure === 'compensate') {
      this.beginUndo(tx, 'compensated');
      return 'compensate';
    }
    this.stopInFlight(tx);
    this.finish(tx, 'failed');
    this.alert(tx, permanent ? 'step_failed' : 'step_error', s.spec.name, s.run.failureCount, alertAttempt ?? s.run.attempt);
    return 'error';
  }

  /**
   * A task that fails without an undo (onFailure: error) stops its other steps. The decision does not
   * say what becomes of them; settled from the Lua: abandoned (a late result is stale, an operator's
   * retry restarts them), effect unknown for an attempt in flight that had not reported (decision 0010:
   * an attempt that ends without a result is always in doubt).
   */
  private stopInFlight(tx: Tx): void {
    for (const s of tx.t.steps.values()) {
      if (s.status === 'waiting' && s.spec.child) {
        // A running child is cancelled too (decision 0019 §2.7); the step keeps its check until the notice.
        this.childCancel(tx, s);
        s.status = 'abandoned';
        raise(s, 'unknown');
        continue;
      }
      if (s.status === 'sleeping' || s.status === 'waiting') {
        this.stopSleep(tx, s);
        continue;
      }
      // A fan-out step's elements in flight or parked stop with it (the step that gave up's too).
      if (s.fe && s.fe.live.length > 0) this.stopElements(s, true);
      if (s.status !== 'processing' && s.status !== 'parked' && s.status !== 'queued') continue;
      if (s.status === 'processing' && !s.run.reported && !s.fe) raise(s, 'unknown');
      // A run waiting for a limit (decision 0020 Q8): its ticket leaves the line.
      delete s.run.q;
      s.status = 'abandoned';
      s.run.parked = false;
      s.run.reported = false;
    }
  }

  /** A sleep or a wait stops at once when its task is undone or fails (decision 0019 U1): abandoned, effect none. */
  private stopSleep(tx: Tx, s: StepM): void {
    s.status = 'abandoned';
    s.abandonedAt = tx.now;
    delete s.wakeAt;
    delete s.timeoutAt;
  }

  /**
   * The undo begins (decision 0009 §3): the task is compensating, nothing new starts; a parked step is
   * abandoned at once; a step in flight keeps its attempt and is waited for. A step that reported a
   * retryable failure (the supervisor had not decided its next attempt) has no attempt in flight either:
   * abandoned at once like a parked one (the decision lists only parked; settled from the Lua).
   * The task deadline no longer applies once the task is not running (§2).
   */
  private beginUndo(tx: Tx, endAs: 'compensated' | 'cancelled'): void {
    const t = tx.t;
    t.status = 'compensating';
    t.endAs = endAs;
    for (const s of t.steps.values()) {
      // A running child is cancelled, and the undo waits for its notice (U2).
      if (s.status === 'waiting' && s.spec.child) this.childCancel(tx, s);
      else if (s.status === 'sleeping' || s.status === 'waiting') this.stopSleep(tx, s);
      else if (s.status === 'queued') {
        // Waiting for a limit (decision 0020 Q8): no attempt in flight, abandoned at once.
        delete s.run.q;
        s.status = 'abandoned';
      } else if (s.status === 'parked' || (s.status === 'processing' && s.run.reported)) {
        s.status = 'abandoned';
        s.run.parked = false;
        s.run.reported = false;
      } else if (s.fe && s.fe.live.length > 0) {
        // A fan-out step (U4): parked elements stop, those in flight drain, pending ones never start.
        this.stopElements(s, false);
        this.settle(tx, s);
      }
    }
    this.nextCompensation(tx);
  }

  private abandonDrain(tx: Tx, s: StepM): void {
    s.status = 'abandoned';
    if (s.parent) {
      const parent = s.parent;
      this.elementLeft(s);
      this.settle(tx, parent);
    }
    this.nextCompensation(tx);
  }

  /**
   * Drives the undo (decision 0009 §3): nothing starts while a step is in flight or a compensation runs;
   * then the compensation of the top candidate starts; none left → the task ends as endAs.
   */
  private nextCompensation(tx: Tx): void {
    const t = tx.t;
    for (const s of t.steps.values()) if (s.status === 'processing' || s.status === 'compensating' || (s.fe?.live.length ?? 0) > 0 || (s.status === 'waiting' && s.spec.child)) return;
    const tied = nextCompensationCandidates(t);
    if (tied.length === 0) {
      this.finish(tx, t.endAs ?? 'compensated');
      return;
    }
    const chosen = tied.length === 1 ? tied[0]! : this.chooseTie(t, tied);
    if (chosen.fe) this.compBegin(tx, chosen);
    else if (chosen.spec.child) this.childUndo(tx, chosen);
    else this.start(tx, chosen, 'compensate');
  }

  /**
   * Readiness (decision 0019 §2.4 R1): every pending step whose dependencies are all done (processed or
   * skipped) is skipped when its condition is false, started otherwise; passes in plan order repeat
   * while one skipped a step (a skip can make a step earlier in the plan ready). The task completes
   * when every step is done.
   */
  private startReady(tx: Tx): void {
    const t = tx.t;
    const steps = [...t.steps.values()];
    const done = (s: StepM | undefined): boolean => s !== undefined && (s.status === 'processed' || s.status === 'skipped');
    for (let pass = 0; pass <= steps.length; pass++) {
      let skipped = false;
      for (const s of steps) {
        if (s.status !== 'pending' || !s.spec.dependsOn.every((d) => done(t.steps.get(d)))) continue;
        // A condition decides once, before the first attempt: a step that ran (a retry of it) runs again.
        const verdict = s.spec.when && s.run.attempt === 0 ? evaluate(s.spec.when, t.input, outputsOf(t)) : { holds: true };
        if (verdict.holds && s.spec.sleep) {
          const wake = this.wakeTime(t, s.spec.sleep, tx.now);
          if (typeof wake === 'string') {
            // A wake time that cannot be used: the step fails for good at its start (R4); no attempt
            // ran, so its alert is named by its failures at start.
            s.startFailures = (s.startFailures ?? 0) + 1;
            this.giveUp(tx, s, 'run', true, `start-${s.startFailures}`);
            return;
          }
          s.sleptAt = tx.now;
          if (wake <= tx.now) {
            this.completeWithoutAgent(tx, s);
            skipped = true; // done at once: it may make others ready, as a skip does
          } else {
            s.status = 'sleeping';
            s.wakeAt = wake;
          }
        } else if (verdict.holds && s.spec.waitFor) {
          // R6/R7: the oldest kept signal of its name, else wait until the timeout.
          s.waits = (s.waits ?? 0) + 1;
          s.waitedAt = tx.now;
          const i = t.signalQueue.findIndex((q) => q.name === s.spec.waitFor!.signal);
          if (i >= 0) {
            const [q] = t.signalQueue.splice(i, 1);
            this.deliver(tx, s, q!.id, q!.data);
            skipped = true; // done at once: it may make others ready
          } else {
            s.status = 'waiting';
            s.timeoutAt = tx.now + s.spec.waitFor.timeoutMs;
          }
        } else if (verdict.holds && s.spec.child) {
          this.childStart(tx, s);
        } else if (verdict.holds && s.spec.forEach) {
          const r = this.fanOutBegin(tx, s);
          if (r === 'failed') return;
          if (r === 'done') skipped = true; // done at once: it may make others ready
        } else if (verdict.holds) {
          this.start(tx, s, 'run');
        } else {
          s.status = 'skipped';
          s.skippedAt = tx.now;
          s.reason = verdict.reason ?? '';
          skipped = true;
        }
      }
      if (!skipped) break;
    }
    if (steps.every(done)) this.finish(tx, 'completed');
  }

  // ---------------------------------------------------------------- child tasks (decision 0019 §5)

  /** The check: the current operation is sent again at `next` (never after a timeout still to fire). */
  private childCheck(tx: Tx, s: StepM, delay: number): void {
    s.child!.next = tx.now + delay;
  }

  /** The step's current operation, for the caller to apply to its child. */
  private childDispatch(tx: Tx, s: StepM, kind: Kind): void {
    const c = s.child!;
    c.sent++;
    const attempt = kind === 'compensate' ? s.comp!.attempt : s.run.attempt;
    tx.dispatch.push({ taskId: tx.t.id, step: s.spec.name, agent: '', kind, attempt, completeBy: 0, child: c.op, childId: c.id, sent: c.sent });
  }

  /** A ready child step starts (R14): a new attempt, a new child. */
  private childStart(tx: Tx, s: StepM): void {
    s.run.attempt++;
    s.run.startedAt = tx.now;
    s.status = 'waiting';
    s.child = { id: childIdOf(tx.t.id, s.spec.name, s.run.attempt), op: 'start', sent: 0, next: 0 };
    if (s.spec.child!.timeoutMs !== undefined) s.child.timeoutAt = tx.now + s.spec.child!.timeoutMs;
    this.childCheck(tx, s, CHILD_FIRST_CHECK_MS);
    this.childDispatch(tx, s, 'run');
  }

  /** A running child is cancelled (its parent is undone or fails); a cancel asked already (a timeout) stands. */
  private childCancel(tx: Tx, s: StepM): void {
    if (s.child!.op !== 'start') return;
    s.child!.op = 'cancel';
    this.childCheck(tx, s, CHILD_FIRST_CHECK_MS);
    this.childDispatch(tx, s, 'run');
  }

  /** A child step's turn in the undo (U7): its child is undone. */
  private childUndo(tx: Tx, s: StepM): void {
    s.comp ??= newPhase();
    s.comp.attempt++;
    s.comp.startedAt = tx.now;
    s.status = 'compensating';
    s.child!.op = 'undo';
    delete s.child!.ended;
    tx.t.compStarts.push(s.spec.name);
    this.childCheck(tx, s, CHILD_FIRST_CHECK_MS);
    this.childDispatch(tx, s, 'compensate');
  }

  /**
   * The `start` operation (startChild.lua): the child created with its link, or, when it exists, nothing
   * but its notice written again if it ended. Returns 'started' or 'exists'.
   */
  startChild(childId: string, client: string, spec: TaskSpec, input: unknown, link: LinkM, now: number): { outcome: Outcome; action: 'started' | 'exists' } {
    const t = this.tasks.get(childId);
    if (t) {
      if (TERMINAL.has(t.status)) t.notice = Math.max(now, t.updatedAt);
      return { outcome: { code: 'noop' }, action: 'exists' };
    }
    return { outcome: this.create(childId, client, spec, now, input, { ...link }), action: 'started' };
  }

  /**
   * The `cancel` and `undo` operations (cancelChild.lua, undoChild.lua): a tombstone for a child never
   * started; a running child's undo (to end cancelled); a completed or failed child undone (to end
   * compensated) by `undo`; else its notice again. The link only moves forward.
   */
  stopChild(op: 'cancel' | 'undo', childId: string, client: string, link: LinkM, now: number): { outcome: Outcome; action: string } {
    const t = this.tasks.get(childId);
    if (!t) {
      const tomb: TaskM = { ...newTask(childId, client, { steps: [], onFailure: 'error' }, undefined, now), link: { ...link } };
      this.tasks.set(childId, tomb);
      const tx = this.tx(tomb, now);
      this.finish(tx, 'cancelled');
      return { outcome: this.applied(tx), action: 'tombstone' };
    }
    const l = t.link!;
    const rank = (k: Kind): number => (k === 'run' ? 0 : 1);
    if (rank(link.kind) > rank(l.kind) || (link.kind === l.kind && link.attempt > l.attempt)) {
      l.kind = link.kind;
      l.attempt = link.attempt;
    }
    if (t.status === 'running') {
      const tx = this.tx(t, now);
      this.beginUndo(tx, 'cancelled');
      return { outcome: this.applied(tx), action: 'cancelling' };
    }
    if (t.status === 'compensating') return { outcome: { code: 'noop' }, action: 'linked' };
    if (op === 'undo' && (t.status === 'completed' || t.status === 'failed')) {
      const tx = this.tx(t, now);
      delete t.finishedAt;
      this.beginUndo(tx, 'compensated');
      return { outcome: this.applied(tx), action: 'undoing' };
    }
    t.notice = Math.max(now, t.updatedAt);
    return { outcome: { code: 'noop' }, action: 'ended' };
  }

  /** takeParentNotice: the child's end and link, its notice moved 5 s ahead; undefined (notice dropped) when there is none to deliver. */
  takeNotice(childId: string, now: number, epoch: number): { code: 'stale_epoch' } | { code: 'none' } | { code: 'deliver'; link: LinkM; status: TaskStatus; output: unknown; score: number } {
    if (epoch < this.epoch) return { code: 'stale_epoch' };
    const t = this.tasks.get(childId);
    if (!t || !t.link || !TERMINAL.has(t.status)) {
      if (t) delete t.notice;
      return { code: 'none' };
    }
    t.notice = now + 5_000;
    return { code: 'deliver', link: { ...t.link }, status: t.status, output: t.output, score: t.notice };
  }

  /** childEnded on the parent (R15, R18, U3, U3′, U8), fenced by epoch and by the step's phase attempt. */
  childEnded(link: LinkM, childId: string, status: TaskStatus, output: unknown, now: number, epoch: number): Outcome & { ended?: string } {
    if (epoch < this.epoch) return { code: 'stale_epoch' };
    const t = this.tasks.get(link.parent);
    const s = t?.steps.get(link.step);
    const c = s?.child;
    if (!t || !s || !c || c.id !== childId || c.ended) return { code: 'noop' };
    const run = link.kind === 'run' && s.run.attempt === link.attempt && (s.status === 'waiting' || s.status === 'abandoned');
    const undo = link.kind === 'compensate' && s.status === 'compensating' && s.comp !== undefined && s.comp.attempt === link.attempt;
    if (!run && !undo) return { code: 'noop' };
    const tx = this.tx(t, now);
    c.ended = status;
    if (undo) {
      if (status === 'cancelled' || status === 'compensated') {
        s.status = 'compensated';
        this.nextCompensation(tx);
      } else if (status === 'compensation_failed') {
        this.giveUp(tx, s, 'compensate', true);
      } else {
        delete c.ended;
        this.childCheck(tx, s, CHILD_FIRST_CHECK_MS);
      }
      return this.applied(tx);
    }
    s.effect = CHILD_EFFECT[status] ?? 'unknown';
    if (s.status === 'abandoned') return this.applied(tx);
    if (t.status === 'compensating') {
      if (status === 'completed') this.completeWithoutAgent(tx, s, output);
      else s.status = 'abandoned';
      this.nextCompensation(tx);
    } else if (t.status !== 'running') {
      // nothing more
    } else if (c.timedOut) {
      this.giveUp(tx, s, 'run', false);
    } else if (status === 'completed') {
      this.completeWithoutAgent(tx, s, output);
      this.startReady(tx);
    } else {
      this.giveUp(tx, s, 'run', true);
    }
    return this.applied(tx);
  }

  /** dropParentNotice: the notice removed if it is still the one taken. */
  dropNotice(childId: string, score: number, notified: string, epoch: number): 'stale_epoch' | 'dropped' | 'kept' {
    if (epoch < this.epoch) return 'stale_epoch';
    const t = this.tasks.get(childId);
    if (!t || t.notice !== score) return 'kept';
    delete t.notice;
    t.notified = notified;
    return 'dropped';
  }

  // ---------------------------------------------------------------- fan-out (decision 0019 §4)

  /**
   * A ready fan-out step (R10, R11, R4): its list is the task input's `items`, read once — absent, not a
   * list or over maxItems fails the step at its start; an empty one completes it at once. A step that ran
   * before (an operator's retry) resumes: its stopped elements start again with fresh budgets, processed
   * ones stay. Elements start in index order, at most maxParallel at once.
   */
  private fanOutBegin(tx: Tx, s: StepM): 'started' | 'done' | 'failed' {
    if (s.fe) {
      const fe = s.fe;
      for (const e of s.elements!.slice(0, fe.hi)) {
        if (e.status === 'failed' || e.status === 'error' || e.status === 'abandoned' || e.status === 'parked') {
          e.status = 'pending';
          e.run.failureCount = 0;
          e.run.circuitCount = 0;
          e.run.parked = false;
          e.run.reported = false;
          delete e.run.giveUpAt;
        }
      }
      fe.next = 0;
      fe.live = [];
    } else {
      const items = (tx.t.input as Record<string, unknown> | undefined)?.['items'];
      if (!Array.isArray(items) || items.length > s.spec.forEach!.maxItems) {
        s.startFailures = (s.startFailures ?? 0) + 1;
        this.giveUp(tx, s, 'run', true, `start-${s.startFailures}`);
        return 'failed';
      }
      s.fe = { n: items.length, next: 0, hi: 0, live: [], done: 0 };
      s.elements = items.map((_, i) => ({
        spec: { name: `${s.spec.name}#${i}`, dependsOn: [], agent: s.spec.agent, run: s.spec.run, ...(s.spec.comp ? { comp: s.spec.comp } : {}) },
        status: 'pending',
        run: newPhase(),
        effect: 'none',
        parent: s,
        index: i,
      }));
    }
    s.run.attempt++;
    s.run.startedAt ??= tx.now;
    s.status = 'processing';
    this.fill(tx, s);
    if (s.fe.done === s.fe.n) {
      this.completeFanOut(tx, s);
      return 'done';
    }
    return 'started';
  }

  /** Starts pending elements in index order while fewer than maxParallel are started and not ended. */
  private fill(tx: Tx, s: StepM): void {
    const fe = s.fe!;
    while (fe.live.length < s.spec.forEach!.maxParallel && fe.next < fe.n) {
      const e = s.elements![fe.next]!;
      fe.next++;
      if (e.status !== 'pending') continue;
      this.start(tx, e, 'run');
      fe.live.push(e.index!);
      fe.lastStart = tx.now;
      fe.hi = Math.max(fe.hi, e.index! + 1);
    }
  }

  /** Every element processed: so is the step, its output theirs in index order. */
  private completeFanOut(tx: Tx, s: StepM): void {
    s.status = 'processed';
    s.processedAt = tx.now;
    s.order = ++tx.t.doneSeq;
    s.output = s.elements!.map((e) => e.output);
  }

  /** An element leaves the elements in flight: the step takes the most it may have done. */
  private elementLeft(e: StepM): void {
    const fe = e.parent!.fe!;
    fe.live = fe.live.filter((i) => i !== e.index);
    raise(e.parent!, e.effect);
  }

  /** Stops the elements in flight that are not running (parked, reported) — or, with `all`, every one. */
  private stopElements(s: StepM, all: boolean): void {
    for (const i of [...s.fe!.live]) {
      const e = s.elements![i]!;
      if (!all && e.status !== 'parked' && e.status !== 'queued' && !(e.status === 'processing' && e.run.reported)) continue;
      if (all && e.status === 'processing' && !e.run.reported) raise(e, 'unknown');
      delete e.run.q;
      e.status = 'abandoned';
      e.run.parked = false;
      e.run.reported = false;
      this.elementLeft(e);
    }
  }

  /** During an undo, a fan-out step with no element left in flight: processed if all were, else abandoned (U4). */
  private settle(tx: Tx, s: StepM): void {
    if (s.fe!.live.length > 0 || s.status !== 'processing') return;
    if (s.fe!.done === s.fe!.n) this.completeFanOut(tx, s);
    else s.status = 'abandoned';
  }

  /** A fan-out step's turn in the undo (U5): its elements that may have taken effect, latest first (the higher index at a tie). */
  private compBegin(tx: Tx, s: StepM): void {
    const fe = s.fe!;
    const list = s.elements!.slice(0, fe.hi).filter((e) => UNDO_CANDIDATE.has(e.status) && e.effect !== 'none');
    list.sort((a, b) => compareUndo(b, a) || b.index! - a.index!);
    fe.undo = list.map((e) => e.index!);
    fe.undoNext = 0;
    fe.compRunning = 0;
    fe.compFailed = 0;
    s.status = 'compensating';
    s.comp ??= newPhase();
    s.comp.attempt++;
    s.comp.startedAt = tx.now;
    tx.t.compStarts.push(s.spec.name);
    this.compFill(tx, s);
  }

  /**
   * Element compensations start while fewer than maxParallel run and none failed; none running: the step
   * is compensated, or compensation_failed and the task with it. Returns true when the step's undo ended.
   */
  private compFill(tx: Tx, s: StepM): boolean {
    const fe = s.fe!;
    while ((fe.compFailed ?? 0) === 0 && fe.compRunning! < s.spec.forEach!.maxParallel && fe.undoNext! < fe.undo!.length) {
      const e = s.elements![fe.undo![fe.undoNext!]!]!;
      fe.undoNext!++;
      this.start(tx, e, 'compensate');
      fe.compRunning!++;
    }
    if (fe.compRunning! > 0) return false;
    if ((fe.compFailed ?? 0) > 0) {
      // The transition that ends the task records its alerts (decision 0009 §4): one per failed element.
      s.status = 'compensation_failed';
      this.finish(tx, 'compensation_failed');
      for (const i of fe.undo!.slice(0, fe.undoNext)) {
        const e = s.elements![i]!;
        if (e.status === 'compensation_failed') this.alert(tx, 'compensation_failed', e.spec.name, e.comp!.failureCount, e.comp!.attempt);
      }
    } else s.status = 'compensated';
    return true;
  }

  /** A sleep's wake time (R2), or why it cannot sleep (R4): read from the task input, as decision 0019 §1.2 says. */
  private wakeTime(t: TaskM, sl: NonNullable<StepSpec['sleep']>, now: number): number | string {
    if ('ms' in sl) return now + sl.ms;
    const v = (t.input as Record<string, unknown> | undefined)?.[sl.field];
    if (v === undefined) return 'absent';
    if (typeof v !== 'number') return 'not a number';
    if (!Number.isFinite(v) || v < 0) return 'not a time';
    if (v > now + sl.maxMs) return 'beyond maxMs';
    return Math.floor(v);
  }

  /** A step that needs no agent is done: processed, in completion order, no effect; `output` if any. */
  private completeWithoutAgent(tx: Tx, s: StepM, output?: unknown): void {
    s.status = 'processed';
    s.processedAt = tx.now;
    s.order = ++tx.t.doneSeq;
    delete s.wakeAt;
    delete s.timeoutAt;
    if (output !== undefined) s.output = output;
  }

  /** A signal reaches the step waiting for it: its data is the output (R6, R8). */
  private deliver(tx: Tx, s: StepM, id: string, data: unknown): void {
    tx.t.signalIds.set(id, { name: s.spec.waitFor!.signal, to: s.spec.name });
    s.signalId = id;
    this.completeWithoutAgent(tx, s, data);
  }

  /**
   * A signal for a task (decision 0019 §3.3, in its order): a seen id is a duplicate (the same name:
   * nothing written) or refused (another name); a task not running, a name no step waits for, a late
   * one, or a full buffer (16) are refused; a waiting step gets it, else a pending step's name keeps it.
   */
  signal(taskId: string, name: string, id: string, data: unknown, now: number): Outcome {
    const t = this.task(taskId);
    const seen = t.signalIds.get(id);
    if (seen) return seen.name === name ? { code: 'noop' } : { code: 'invalid' };
    if (t.status !== 'running') return { code: 'invalid' };
    const mine = [...t.steps.values()].filter((s) => s.spec.waitFor?.signal === name);
    const waiting = mine.find((s) => s.status === 'waiting');
    if (waiting) {
      const tx = this.tx(t, now);
      this.deliver(tx, waiting, id, data);
      this.startReady(tx);
      return this.applied(tx, 'delivered');
    }
    if (!mine.some((s) => s.status === 'pending') || t.signalQueue.length >= 16) return { code: 'invalid' };
    const tx = this.tx(t, now);
    t.signalQueue.push({ id, name, data });
    t.signalIds.set(id, { name, to: '' });
    return this.applied(tx, 'buffered');
  }

  private finish(tx: Tx, status: TaskStatus): void {
    tx.t.status = status;
    tx.t.finishedAt = tx.now;
    // Admission (decision 0024): an active task's end admits the oldest waiting tasks of its client and
    // bucket while fewer than the share are active; a waiting task's end takes it out of the queue.
    if (this.share > 0) {
      const a = this.admissionOf(tx.t);
      if (a.active.delete(tx.t.id)) {
        while (a.waiting.length > 0 && a.active.size < a.share) {
          const next = this.task(a.waiting.shift()!);
          a.active.add(next.id);
          next.adm = 'a';
          next.admitAt = tx.now + ADMIT_GRACE_MS;
        }
      } else if (a.waiting.includes(tx.t.id)) {
        a.waiting = a.waiting.filter((id) => id !== tx.t.id);
        tx.t.adm = undefined;
      }
    }
    // A child task's end writes its notice, with its output when it completed (decision 0019 §5.3, §5.5).
    if (tx.t.link) {
      tx.t.notice = tx.now;
      if (status === 'completed') tx.t.output = sinkOutputs(tx.t);
    }
  }

  /**
   * An alert, recorded by the transition that makes it necessary: open, and in the outbox (decision 0009
   * §4). Its id names the attempt of the phase that gave up (0 for the task deadline), so it is unique per
   * give-up: a step an operator retried that fails again raises a new alert.
   */
  private alert(tx: Tx, kind: AlertKind, step: string | undefined, failureCount: number, attempt: number | string): void {
    const a: Alert = { id: `${tx.t.id}:${step ?? '#task'}:${kind}:${attempt}`, kind, taskId: tx.t.id, failureCount, raisedAt: tx.now };
    if (step !== undefined) {
      const m = /^(.+)#(\d+)$/.exec(step);
      if (m) {
        a.step = m[1]!;
        a.item = Number(m[2]);
      } else a.step = step;
    }
    this.openAlerts.set(a.id, a);
    this.outbox.push(a);
    tx.alerts.push(a);
  }

  // ---------------------------------------------------------------- derived views

  /**
   * The deadline index the model expects (member → score): each phase with a deadline — a run in flight
   * or reported or parked, a compensation running or parked — and a running task's own deadline.
   */
  expectedDeadlines(): Map<string, number> {
    const out = new Map<string, number>();
    for (const t of this.tasks.values()) {
      if (t.status === 'running' && t.deadlineAt !== undefined) out.set(`${t.id}|#task`, t.deadlineAt);
      if (t.notice !== undefined) out.set(`${t.id}|#parent`, t.notice);
      if (t.admitAt !== undefined) out.set(`${t.id}|#admit`, t.admitAt);
      // A child step's check (decision 0019 §5.3), until its child's notice arrives — a failed parent's too.
      for (const s of t.steps.values()) {
        const c = s.child;
        if (!c || c.ended || !(s.status === 'waiting' || s.status === 'compensating' || s.status === 'abandoned')) continue;
        out.set(`${t.id}|${s.spec.name}`, c.op === 'start' && c.timeoutAt !== undefined && !c.timedOut ? Math.min(c.next, c.timeoutAt) : c.next);
      }
      if (TERMINAL.has(t.status)) continue;
      for (const s of [...t.steps.values()].flatMap((x) => (x.elements ? x.elements : [x]))) {
        if (s.status === 'queued') out.set(`${t.id}|${s.spec.name}`, s.run.q!.at);
        else if (s.status === 'compensating' && s.comp?.q) out.set(`${t.id}|${s.spec.name}`, s.comp.q.at);
        else if (s.status === 'processing' || s.status === 'parked') out.set(`${t.id}|${s.spec.name}`, s.run.completeBy!);
        else if (s.status === 'sleeping') out.set(`${t.id}|${s.spec.name}`, s.wakeAt!);
        else if (s.status === 'waiting' && !s.child) out.set(`${t.id}|${s.spec.name}`, s.timeoutAt!);
        else if (s.status === 'compensating' && !s.child) out.set(`${t.id}|${s.spec.name}`, s.comp!.completeBy!);
      }
    }
    return out;
  }

  /** The requests a scheduler would re-send for a task (runs in flight, compensations running). */
  expectedInFlight(taskId: string): Dispatch[] {
    const t = this.task(taskId);
    if (t.status !== 'running' && t.status !== 'compensating') return [];
    const out: Dispatch[] = [];
    for (const s of [...t.steps.values()].flatMap((x) => (x.elements ? x.elements : [x]))) {
      const count = s.parent ? { count: s.parent.fe!.n } : {};
      const c = s.child;
      if (c) {
        if (c.ended) continue;
        const base = { taskId, step: s.spec.name, agent: '', completeBy: 0, child: c.op, childId: c.id, sent: c.sent };
        if (s.status === 'compensating' && c.op === 'undo') out.push({ ...base, kind: 'compensate', attempt: s.comp!.attempt });
        else if (s.status === 'waiting' || (s.status === 'abandoned' && c.op === 'cancel')) out.push({ ...base, kind: 'run', attempt: s.run.attempt });
        continue;
      }
      if (runInFlight(s)) out.push({ taskId, step: s.spec.name, agent: s.spec.agent, kind: 'run', attempt: s.run.attempt, completeBy: s.run.completeBy!, ...count });
      else if (compInFlight(s)) {
        out.push({ taskId, step: s.spec.name, agent: s.spec.comp!.agent, kind: 'compensate', attempt: s.comp!.attempt, completeBy: s.comp!.completeBy!, effect: s.effect === 'applied' ? 'applied' : 'unknown', ...count });
      }
    }
    return out;
  }
}

/** A child task's output (decision 0019 §5.5): the map of its processed sink steps' outputs. */
export function sinkOutputs(t: TaskM): Record<string, unknown> {
  const inner = new Set(t.spec.steps.flatMap((s) => s.dependsOn));
  const out: Record<string, unknown> = {};
  for (const s of t.steps.values()) if (!inner.has(s.spec.name) && s.status === 'processed') out[s.spec.name] = s.output ?? null;
  return out;
}
