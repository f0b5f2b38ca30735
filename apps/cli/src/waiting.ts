/**
 * Why a step that is not finished waits, and until when (decision 0021 §3), and what a finished one's kind
 * says of it (decision 0019 §7): one function for `triad status`'s DETAIL, `triad stuck`'s WAITING and the
 * dashboard's task page (its bundle includes this module, so it stays pure and imports no runtime code).
 *
 * `waitReason` reads the task's state; what the state cannot say comes in a `WaitContext` the caller
 * gathered (decision 0021 §3.3, settled: computed in the CLI, not by `task.get { explain }`): the agent
 * instance holding an attempt (the probe), the agent type's queue in STEPS, and the supervisors' status.
 * A step waiting for a dispatch limit (issue #24) says for which, and its place in line when `task.get`
 * read it from the limiter (decision 0020 §6).
 */
import type { StepState, TaskState } from '@triad/protocol';
import { clock, duration, relative } from './times.js';

/** The agent instance that answered a probe for an attempt (decision 0021 §3.3's ProbeReply). */
export interface Holder {
  agentId: string;
  /** When it took the request (epoch ms). */
  since: number;
  /** Its call of the service: 1, 2 … (its in-process retries). */
  try: number;
  state?: string;
  /** Between tries: when the next one starts. */
  nextTryAt?: number;
}

/** The supervisors as `supervisor.status` reported them: `leader` absent = none is leading. */
export interface SupervisorSeen {
  leader?: { id: string; lastSweepAt?: number };
}

/** What the caller learned beside the state (all optional: absent = not asked); plain JSON, so the dashboard's server sends it to the page. */
export interface WaitContext {
  /** Probe answers by `probeKey(phase, step, attempt)`: a Holder, or null when it was probed and no agent answered. */
  probes?: Readonly<Record<string, Holder | null>>;
  /** Per agent type, its durable on STEPS: requests not yet delivered, and pull requests waiting (agents pulling). */
  queues?: Readonly<Record<string, { pending: number; pulling: number }>>;
  supervisor?: SupervisorSeen;
}

export type Phase = 'run' | 'compensate';

export type WaitReason =
  | { kind: 'dependencies'; on: string[] }
  | { kind: 'undoing' }
  | { kind: 'drain'; steps: string[] }
  | { kind: 'undo_order'; after: string[] }
  | { kind: 'breaker'; phase: Phase; agent: string; until: number; refusals: number }
  | { kind: 'backoff'; phase: Phase; until: number; failures: number; error?: string }
  | { kind: 'decision'; phase: Phase; attempt: number; error: string }
  | {
      kind: 'in_flight';
      phase: Phase;
      agent: string;
      attempt: number;
      until: number;
      /** The instance holding it (the probe's answer). */
      holder?: Holder;
      /** Probed, and no agent answered. */
      unanswered?: boolean;
      /** Its agent type's queue in STEPS, read when no agent answered. */
      queued?: { pending: number; pulling: number };
    }
  | { kind: 'overdue'; phase: Phase; what: 'complete-by' | 'park' | 'wake' | 'timeout'; since: number; supervisor?: SupervisorSeen }
  | { kind: 'sleep'; until: number }
  | { kind: 'signal'; name: string; until: number }
  | { kind: 'items'; count: number; pending: number; running: number; done: number; failed: number }
  /** Waiting for its agent type's dispatch limit, or put back in line by a throttle (decision 0020 §6). */
  | {
      kind: 'limit';
      phase: Phase;
      agent: string;
      key?: string;
      priority: number;
      since: number;
      why: string;
      /** Its place in line (task.get reads it from the limiter), an upper bound when `placeApprox`. */
      place?: number;
      placeApprox?: boolean;
      /** Granted a permit: being started. */
      granted?: boolean;
      /** A Retry-After pauses its agent type (or key) until then. */
      pausedUntil?: number;
    }
  /** A child step (decision 0019 §5): its child task runs, is being cancelled, or undone. */
  | { kind: 'child'; op: 'start' | 'cancel' | 'undo'; taskId: string; workflow: string; version?: number; until?: number };

/** The key of a probe's answer in `WaitContext.probes`. */
export const probeKey = (phase: Phase, step: string, attempt: number): string => `${phase}|${step}|${attempt}`;

const DONE = new Set(['processed', 'skipped']);
const hhmmss = (ms: number): string => clock(ms).slice(0, 8);

/** The reason step `s` of task `t` waits, or undefined when it is finished (or waits for nothing Triad can name). */
export function waitReason(t: Pick<TaskState, 'status' | 'steps'>, s: StepState, now: number, ctx: WaitContext = {}): WaitReason | undefined {
  const undoing = t.status === 'compensating';
  const c = s.compensation;
  // Waiting for a dispatch limit (decision 0020): the run, or (during an undo) the compensation.
  if (undoing && c && s.status === 'compensating' && c.queue) return limitReason('compensate', c.queue);
  if (s.status === 'queued' && s.queue) return limitReason('run', s.queue);
  // A child step waits for its child's end, whatever it asked of it (decision 0019 §5.3).
  const ch = s.child;
  if (ch && ch.ended === undefined && (s.status === 'waiting' || s.status === 'compensating' || (s.status === 'abandoned' && ch.op === 'cancel'))) {
    const op: 'start' | 'cancel' | 'undo' = ch.op === 'cancel' ? 'cancel' : ch.op === 'undo' ? 'undo' : 'start';
    return { kind: 'child', op, taskId: ch.taskId, workflow: ch.workflow, ...(ch.version !== undefined ? { version: ch.version } : {}), ...(s.until !== undefined && op === 'start' ? { until: s.until } : {}) };
  }
  // The compensation phase first: it is what moves while a task is undone.
  if (undoing && c && s.status === 'compensating') {
    if (c.parked && c.completeBy !== undefined) return parkedReason('compensate', c.agent, c, now, ctx);
    if (c.completeBy !== undefined) return attemptReason('compensate', s.name, c.agent, c.attempt, c.completeBy, c.error, now, ctx);
  }
  if (s.status === 'pending') {
    if (undoing) return { kind: 'undoing' };
    if (t.status !== 'running') return undefined;
    const on = s.dependsOn.filter((d) => !DONE.has(t.steps.find((x) => x.name === d)?.status ?? ''));
    return on.length > 0 ? { kind: 'dependencies', on } : undefined;
  }
  if (s.status === 'sleeping' && s.until !== undefined) return s.until <= now ? overdue('run', 'wake', s.until, ctx) : { kind: 'sleep', until: s.until };
  if (s.status === 'waiting' && s.until !== undefined) return s.until <= now ? overdue('run', 'timeout', s.until, ctx) : { kind: 'signal', name: s.signal ?? '?', until: s.until };
  if (s.status === 'parked' && s.completeBy !== undefined) return parkedReason('run', s.agent, s, now, ctx);
  // A fan-out step: its elements run (each with its own attempt); the step waits for them.
  if (s.status === 'processing' && s.items) return { kind: 'items', ...s.items };
  if (s.status === 'processing' && s.completeBy !== undefined) return attemptReason('run', s.name, s.agent, s.attempt, s.completeBy, s.error, now, ctx);
  // A step that may have taken effect, in a task being undone, whose compensation has not started.
  if (undoing && s.status === 'processed' && (s.effect ?? 'none') !== 'none' && !c) {
    const inFlight = t.steps.filter((x) => x.status === 'processing').map((x) => x.name);
    if (inFlight.length > 0) return { kind: 'drain', steps: inFlight };
    const after = t.steps
      .filter((x) => x !== s && (x.order ?? -1) > (s.order ?? -1) && (x.effect ?? 'none') !== 'none' && (!x.compensation || x.compensation.finishedAt === undefined))
      .sort((a, b) => (b.order ?? 0) - (a.order ?? 0))
      .map((x) => x.name);
    return after.length > 0 ? { kind: 'undo_order', after } : undefined;
  }
  return undefined;
}

function overdue(phase: Phase, what: 'complete-by' | 'park' | 'wake' | 'timeout', since: number, ctx: WaitContext): WaitReason {
  return { kind: 'overdue', phase, what, since, ...(ctx.supervisor ? { supervisor: ctx.supervisor } : {}) };
}

function attemptReason(phase: Phase, step: string, agent: string, attempt: number, until: number, error: string | undefined, now: number, ctx: WaitContext): WaitReason {
  // A reported failure moved the deadline to now: the supervisor decides.
  if (until <= now) return error ? { kind: 'decision', phase, attempt, error } : overdue(phase, 'complete-by', until, ctx);
  const r: Extract<WaitReason, { kind: 'in_flight' }> = { kind: 'in_flight', phase, agent, attempt, until };
  const probed = ctx.probes?.[probeKey(phase, step, attempt)];
  if (probed) r.holder = probed;
  else if (probed === null) {
    r.unanswered = true;
    const q = ctx.queues?.[agent];
    if (q) r.queued = q;
  }
  return r;
}

function limitReason(phase: Phase, q: NonNullable<StepState['queue']>): WaitReason {
  return {
    kind: 'limit',
    phase,
    agent: q.agent,
    ...(q.key ? { key: q.key } : {}),
    priority: q.priority,
    since: q.since,
    why: q.why,
    ...(q.place !== undefined ? { place: q.place } : {}),
    ...(q.placeApprox ? { placeApprox: true } : {}),
    ...(q.granted ? { granted: true } : {}),
    ...(q.pausedUntil !== undefined ? { pausedUntil: q.pausedUntil } : {}),
  };
}

function parkedReason(phase: Phase, agent: string, p: { completeBy?: number; parkedFor?: string; circuitCount?: number; failureCount: number; error?: string }, now: number, ctx: WaitContext): WaitReason {
  const until = p.completeBy as number;
  if (until <= now) return overdue(phase, 'park', until, ctx);
  if (p.parkedFor === 'breaker') return { kind: 'breaker', phase, agent, until, refusals: p.circuitCount ?? 0 };
  return { kind: 'backoff', phase, until, failures: p.failureCount, ...(p.error ? { error: p.error } : {}) };
}

const count = (n: number): string => n.toLocaleString('en-US');
const plural = (n: number, one: string, many = `${one}s`): string => `${count(n)} ${n === 1 ? one : many}`;

/** The reason as one line (decision 0021 §3.5's texts), times in local HH:MM:SS with their distance from now. */
export function waitingText(r: WaitReason, now: number): string {
  const at = (ms: number): string => `${hhmmss(ms)} (${relative(ms, now)})`;
  const pre = 'phase' in r && r.phase === 'compensate' ? 'compensation ' : '';
  switch (r.kind) {
    case 'dependencies':
      return `waiting for ${r.on.join(', ')}`;
    case 'undoing':
      return 'will not run: the task is being undone';
    case 'drain':
      return `the undo waits for ${r.steps.join(', ')} (in flight) before compensating`;
    case 'undo_order':
      return `to be compensated after ${r.after.join(', ')} (latest first)`;
    case 'breaker':
      return `${pre}parked until ${at(r.until)}: ${r.agent}'s circuit breaker is open (refusal ${r.refusals})`;
    case 'backoff':
      return `${pre}backing off until ${at(r.until)} after ${plural(r.failures, 'failure')}${r.error ? `: ${r.error}` : ''}`;
    case 'decision':
      return `${pre}attempt ${r.attempt} failed (${r.error}); the supervisor decides the next try at its next sweep`;
    case 'in_flight': {
      const by = `complete-by ${at(r.until)}`;
      if (r.holder) {
        const h = r.holder;
        const between = h.nextTryAt !== undefined ? `, backing off until ${hhmmss(h.nextTryAt)}` : '';
        return `${pre}in flight at ${h.agentId} (try ${h.try}, since ${hhmmss(h.since)}${between}) until ${by}`;
      }
      if (r.queued && r.queued.pending > 0) {
        return `${pre}not yet taken by any ${r.agent} agent: ${plural(r.queued.pending, 'request waits', 'requests wait')}, ${plural(r.queued.pulling, 'agent', 'agents')} pulling; ${by}`;
      }
      if (r.unanswered) return `${pre}in flight at a ${r.agent} agent until ${by} (no agent answered the probe)`;
      return `${pre}in flight at a ${r.agent} agent (attempt ${r.attempt}) until ${by}`;
    }
    case 'overdue': {
      const what = r.what === 'park' ? 'the park ended' : r.what === 'wake' ? 'the wake-up time passed' : r.what === 'timeout' ? 'the timeout passed' : 'complete-by passed';
      const sup = r.supervisor;
      const who = !sup
        ? 'waiting for the supervisor (is one running? triad supervisor status)'
        : sup.leader
          ? `waiting for the supervisor (leader ${sup.leader.id}, ${sup.leader.lastSweepAt !== undefined ? `last sweep ${relative(sup.leader.lastSweepAt, now)}` : 'no sweep reported'})`
          : 'no supervisor is leading — start one (triad supervisor)';
      return `${pre}${what} ${relative(r.since, now)}: ${who}`;
    }
    case 'sleep':
      return `sleeping until ${at(r.until)}`;
    case 'signal':
      return `waiting for signal ${r.name} until ${at(r.until)}`;
    case 'items':
      return elementsDetail(r);
    case 'limit':
      return `${pre}${limitText(r, now)} (${r.key ? `key ${r.key}, ` : ''}priority ${r.priority}, ${duration(Math.max(0, now - r.since))} so far)`;
    case 'child': {
      const which = `child task ${r.taskId} (${r.workflow}${r.version !== undefined ? `@${r.version}` : ''})`;
      if (r.op === 'undo') return `undoing ${which}`;
      if (r.op === 'cancel') return `cancelling ${which}`;
      return `waiting for ${which}${r.until !== undefined ? ` until ${at(r.until)}` : ''}`;
    }
  }
}

/**
 * A waiting phase's line (decision 0020 §6): `waits for a limit of payment: place 12`, `place ≤ 4,212`
 * when approximate, `throttled by payment: paused until 12:00:03, then place 3`; without a place (the
 * limiter did not answer) what the state alone says.
 */
function limitText(r: Extract<WaitReason, { kind: 'limit' }>, now: number): string {
  const head = r.why === 'throttled' ? `throttled by ${r.agent}` : `waits for a limit of ${r.agent}`;
  if (r.granted) return `${head}: granted, starting`;
  const place = r.place !== undefined ? `place ${r.placeApprox ? '≤ ' : ''}${count(r.place)}` : undefined;
  const paused = r.pausedUntil !== undefined && r.pausedUntil > now ? `paused until ${hhmmss(r.pausedUntil)}` : undefined;
  if (paused) return `${head}: ${paused}${place ? `, then ${place}` : ''}`;
  if (place) return `${head}: ${r.why === 'throttled' ? 'back in line, ' : ''}${place}`;
  return r.why === 'throttled' ? `${head}: back in line` : head;
}

/** A fan-out step's elements: "elements 3 done, 2 running, 1 failed, 4 pending of 10" (only the counts that are not 0). */
export function elementsDetail(items: NonNullable<StepState['items']>): string {
  const parts = (['done', 'running', 'failed', 'pending'] as const).filter((k) => items[k] > 0).map((k) => `${items[k]} ${k}`);
  return `elements ${parts.length > 0 ? parts.join(', ') : 'none'} of ${items.count}`;
}

/**
 * What a step's kind says of it without its task (decision 0019 §7): a skipped step's reason, a sleep's
 * wake time, a signal's timeout or the one it received, a fan-out step's elements. `stepWaiting` says more
 * when the task is at hand.
 */
export function stepDetail(s: Pick<StepState, 'status' | 'reason' | 'until' | 'signal' | 'signalId' | 'items' | 'child'>, now: number = Date.now()): string | undefined {
  if (s.items) return elementsDetail(s.items);
  // A child step whose child ended: how (decision 0019 §7); one still waiting has a reason (waitReason).
  if (s.child) return s.child.ended !== undefined ? `child task ${s.child.taskId} (${s.child.workflow}${s.child.version !== undefined ? `@${s.child.version}` : ''}) ${s.child.ended}` : undefined;
  if (s.status === 'skipped') return s.reason ? `skipped: ${s.reason}` : 'skipped';
  if (s.status === 'sleeping' && s.until !== undefined) return waitingText({ kind: 'sleep', until: s.until }, now);
  if (s.status === 'waiting' && s.until !== undefined) return waitingText({ kind: 'signal', name: s.signal ?? '?', until: s.until }, now);
  if (s.status === 'processed' && s.signalId !== undefined) return `signal ${s.signal ?? '?'} received (id ${s.signalId})`;
  return undefined;
}

/** The one line of a step of `t`: what it waits for and until when, else what its kind says of it; undefined when nothing. */
export function stepWaiting(t: Pick<TaskState, 'status' | 'steps'>, s: StepState, now: number, ctx: WaitContext = {}): string | undefined {
  const r = waitReason(t, s, now, ctx);
  return r ? waitingText(r, now) : stepDetail(s, now);
}

/** The task-level reason: the first step in plan order that has one (decision 0021 §3.2), with its text. */
export function taskWaiting(t: Pick<TaskState, 'status' | 'steps'>, now: number, ctx: WaitContext = {}): { step: string; reason: WaitReason; text: string } | undefined {
  for (const s of t.steps) {
    const reason = waitReason(t, s, now, ctx);
    if (reason) return { step: s.name, reason, text: waitingText(reason, now) };
  }
  return undefined;
}

/**
 * What a caller must ask to complete the reasons (decision 0021 §3.6): the attempts to probe (agent type,
 * phase, step, attempt) of the steps in flight, and whether any deadline passed (then the supervisors'
 * status tells who should have acted).
 */
export function explainNeeds(t: Pick<TaskState, 'status' | 'steps'>, now: number): { probes: { agent: string; phase: Phase; step: string; attempt: number }[]; supervisor: boolean } {
  const probes: { agent: string; phase: Phase; step: string; attempt: number }[] = [];
  let supervisor = false;
  for (const s of t.steps) {
    const r = waitReason(t, s, now);
    if (r?.kind === 'overdue') supervisor = true;
    if (r?.kind === 'in_flight') probes.push({ agent: r.agent, phase: r.phase, step: s.name, attempt: r.attempt });
  }
  return { probes, supervisor };
}
