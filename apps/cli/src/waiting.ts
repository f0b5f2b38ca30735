/**
 * Why a step that is not finished waits, and until when (decision 0021 §3), from the task's state alone:
 * its dependencies, an undo under way, a breaker or a back-off (the park's cause is recorded), a
 * reported failure waiting for the supervisor's decision, its agent's attempt in flight until its
 * complete-by, a deadline no supervisor acted on yet, a sleep or a signal. Pure: `triad status` renders it
 * (the WAITING of each step). Not here yet (decision 0021 §3.3/§3.4 and issue #24): the agent instance
 * holding an attempt (the probe), the streams' queues, flow-control limits, and submissions no scheduler
 * has picked up.
 */
import type { StepState, TaskState } from '@triad/protocol';
import { clock, duration, relative } from './format.js';

export type WaitReason =
  | { kind: 'dependencies'; on: string[] }
  | { kind: 'undoing' }
  | { kind: 'drain'; steps: string[] }
  | { kind: 'undo_order'; after: string[] }
  | { kind: 'breaker'; phase: Phase; agent: string; until: number; refusals: number }
  | { kind: 'backoff'; phase: Phase; until: number; failures: number; error?: string }
  | { kind: 'decision'; phase: Phase; attempt: number; error: string }
  | { kind: 'in_flight'; phase: Phase; agent: string; attempt: number; until: number }
  | { kind: 'overdue'; phase: Phase; what: 'complete-by' | 'park' | 'wake'; since: number }
  | { kind: 'sleep'; until: number }
  | { kind: 'signal'; name: string; until: number }
  | { kind: 'limit'; phase: Phase; agent: string; key?: string; priority: number; since: number; why: string };
type Phase = 'run' | 'compensate';

const DONE = new Set(['processed', 'skipped']);
const hhmmss = (ms: number): string => clock(ms).slice(0, 8);

/** The reason step `s` of task `t` waits, or undefined when it is finished (or waits for nothing Triad can name). */
export function waitReason(t: Pick<TaskState, 'status' | 'steps'>, s: StepState, now: number): WaitReason | undefined {
  const undoing = t.status === 'compensating';
  const c = s.compensation;
  // The compensation phase first: it is what moves while a task is undone.
  if (undoing && c && s.status === 'compensating' && c.queue) return limitReason('compensate', c.queue);
  if (s.status === 'queued' && s.queue) return limitReason('run', s.queue);
  if (undoing && c && s.status === 'compensating') {
    if (c.parked && c.completeBy !== undefined) return parkedReason('compensate', c.agent, c, now);
    if (c.completeBy !== undefined) {
      if (c.completeBy <= now) return c.error ? { kind: 'decision', phase: 'compensate', attempt: c.attempt, error: c.error } : { kind: 'overdue', phase: 'compensate', what: 'complete-by', since: c.completeBy };
      return { kind: 'in_flight', phase: 'compensate', agent: c.agent, attempt: c.attempt, until: c.completeBy };
    }
  }
  if (s.status === 'pending') {
    if (undoing) return { kind: 'undoing' };
    if (t.status !== 'running') return undefined;
    const on = s.dependsOn.filter((d) => !DONE.has(t.steps.find((x) => x.name === d)?.status ?? ''));
    return on.length > 0 ? { kind: 'dependencies', on } : undefined;
  }
  if (s.status === 'sleeping' && s.until !== undefined) return s.until <= now ? { kind: 'overdue', phase: 'run', what: 'wake', since: s.until } : { kind: 'sleep', until: s.until };
  if (s.status === 'waiting' && s.until !== undefined) return { kind: 'signal', name: s.signal ?? '?', until: s.until };
  if (s.status === 'parked' && s.completeBy !== undefined) return parkedReason('run', s.agent, s, now);
  if (s.status === 'processing' && s.completeBy !== undefined) {
    if (s.completeBy <= now) return s.error ? { kind: 'decision', phase: 'run', attempt: s.attempt, error: s.error } : { kind: 'overdue', phase: 'run', what: 'complete-by', since: s.completeBy };
    return { kind: 'in_flight', phase: 'run', agent: s.agent, attempt: s.attempt, until: s.completeBy };
  }
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

function limitReason(phase: Phase, q: NonNullable<StepState['queue']>): WaitReason {
  return { kind: 'limit', phase, agent: q.agent, ...(q.key ? { key: q.key } : {}), priority: q.priority, since: q.since, why: q.why };
}

function parkedReason(phase: Phase, agent: string, p: { completeBy?: number; parkedFor?: string; circuitCount?: number; failureCount: number; error?: string }, now: number): WaitReason {
  const until = p.completeBy as number;
  if (until <= now) return { kind: 'overdue', phase, what: 'park', since: until };
  if (p.parkedFor === 'breaker') return { kind: 'breaker', phase, agent, until, refusals: p.circuitCount ?? 0 };
  return { kind: 'backoff', phase, until, failures: p.failureCount, ...(p.error ? { error: p.error } : {}) };
}

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
      return `${pre}backing off until ${at(r.until)} after ${r.failures} failure${r.failures === 1 ? '' : 's'}${r.error ? `: ${r.error}` : ''}`;
    case 'decision':
      return `${pre}attempt ${r.attempt} failed (${r.error}); the supervisor decides the next try at its next sweep`;
    case 'in_flight':
      return `${pre}in flight at a ${r.agent} agent (attempt ${r.attempt}) until complete-by ${at(r.until)}`;
    case 'overdue':
      return `${pre}${r.what === 'park' ? 'the park ended' : r.what === 'wake' ? 'the wake-up time passed' : 'complete-by passed'} ${relative(r.since, now)}: waiting for the supervisor (is one running? triad supervisor status)`;
    case 'sleep':
      return `sleeping until ${at(r.until)}`;
    case 'signal':
      return `waiting for signal ${r.name} until ${at(r.until)}`;
    case 'limit':
      return `${pre}${r.why === 'throttled' ? `throttled by ${r.agent}: back in line` : `waits for a limit of ${r.agent}`} (${r.key ? `key ${r.key}, ` : ''}priority ${r.priority}, ${duration(Math.max(0, now - r.since))} so far)`;
  }
}

/** The WAITING text of a step of `t`, or undefined. */
export function stepWaiting(t: Pick<TaskState, 'status' | 'steps'>, s: StepState, now: number): string | undefined {
  const r = waitReason(t, s, now);
  return r ? waitingText(r, now) : undefined;
}
