// Waits on a test Triad's observable state — a step's record, the tasks in flight, the supervisors'
// reports — so fault tests act and assert when the state they need is there, not after a guessed time.
// Everything is read from the state store, so a wait still works while a scheduler or NATS is down.
import type { SupervisorReport } from '@triad/client';
import { SupervisorHealthSchema, type StepState, type TaskState } from '@triad/protocol';
import { TaskStore } from '@triad/store';
import { waitFor } from '../harness/index.js';
import type { TestTriad } from './triad.js';

const DEFAULT_TIMEOUT_MS = 30_000;

function store(t: TestTriad): TaskStore {
  return new TaskStore(t.redis, t.namespace);
}

function describeStep(s: StepState): string {
  return `status=${s.status} attempt=${s.attempt} lockedBy=${s.lockedBy ?? '-'} failureCount=${s.failureCount}`;
}

/** An agent has claimed the step's current attempt: it is processing, and claimStep recorded its holder. */
export function claimedByAgent(s: StepState): boolean {
  return s.status === 'processing' && s.lockedBy !== undefined;
}

/** Resolves with the step's state once `accept` holds for it; a timeout names `what` and the last state seen. */
export async function waitForStep(
  t: TestTriad,
  taskId: string,
  step: string,
  accept: (s: StepState) => boolean,
  what: string,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<StepState> {
  let last: StepState | undefined;
  let found = false;
  return waitFor(
    async () => {
      const task = await store(t).getTask(taskId);
      found = task !== undefined;
      last = task?.steps.find((s) => s.name === step);
      return last !== undefined && accept(last) ? last : undefined;
    },
    {
      timeoutMs,
      what: `step ${step} of task ${taskId}: ${what}`,
      lastSeen: () => (last ? describeStep(last) : found ? `the task has no step ${step}` : 'no such task yet'),
    },
  );
}

/** Waits until an agent instance has claimed the step (so the agent is mid-step); resolves with its state. */
export function waitForClaim(t: TestTriad, taskId: string, step: string, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<StepState> {
  return waitForStep(t, taskId, step, claimedByAgent, 'an agent to claim it (status processing, lockedBy set)', timeoutMs);
}

/** The states of the tasks of `ids` that exist (a submission not yet taken by a scheduler has none). */
export async function taskStates(t: TestTriad, ids: readonly string[]): Promise<TaskState[]> {
  const s = store(t);
  return (await Promise.all(ids.map((id) => s.getTask(id)))).filter((x) => x !== undefined);
}

/** The tasks of `ids` whose work is under way at an agent: running, with a step an agent has claimed. */
export async function tasksInFlight(t: TestTriad, ids: readonly string[]): Promise<TaskState[]> {
  return (await taskStates(t, ids)).filter((x) => x.status === 'running' && x.steps.some(claimedByAgent));
}

/** Waits until at least `atLeast` of `ids` are in flight (see tasksInFlight); resolves with those. */
export async function waitForInFlight(t: TestTriad, ids: readonly string[], atLeast: number, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<TaskState[]> {
  let seen = 0;
  return waitFor(
    async () => {
      const inFlight = await tasksInFlight(t, ids);
      seen = inFlight.length;
      return inFlight.length >= atLeast ? inFlight : undefined;
    },
    {
      timeoutMs,
      intervalMs: 20,
      what: `${atLeast} of ${ids.length} tasks to be in flight (running, a step claimed by an agent)`,
      lastSeen: () => `${seen} in flight`,
    },
  );
}

/** The current supervisor leader (from its lease) and every supervisor's last report, validated. */
export async function supervisorReports(t: TestTriad): Promise<{ leader?: { id: string; epoch: number }; reports: SupervisorReport[] }> {
  const { leader, supervisors } = await store(t).supervisorStatus();
  const reports = supervisors.map((raw): SupervisorReport => {
    const health = SupervisorHealthSchema.parse(raw);
    const at = raw['at'];
    if (typeof at !== 'number') throw new Error(`the report of ${health.supervisorId} has no numeric "at" (got ${JSON.stringify(at)}): is the supervisor older than this test?`);
    return { ...health, at };
  });
  return leader ? { leader, reports } : { reports };
}

/** Resolves with the first report of `supervisorId` for which `accept` holds; a timeout names `what` and the last report. */
export async function waitForSupervisorReport(
  t: TestTriad,
  supervisorId: string,
  accept: (r: SupervisorReport) => boolean,
  what: string,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<SupervisorReport> {
  let last: SupervisorReport | undefined;
  return waitFor(
    async () => {
      last = (await supervisorReports(t)).reports.find((r) => r.supervisorId === supervisorId);
      return last && accept(last) ? last : undefined;
    },
    { timeoutMs, intervalMs: 20, what: `supervisor ${supervisorId}: ${what}`, lastSeen: () => (last ? JSON.stringify(last) : 'no report') },
  );
}

/**
 * Waits until `n` sweeps that began after this call have ended: of one supervisor (`supervisorId`), or
 * else of whichever leads. A supervisor writes its report at the end of a sweep (a follower's every
 * sweep, the leader's at least once per interval), so distinct report times count ended sweeps; the
 * first report after the call may end a sweep begun before it, hence n + 1 reports. Resolves with the
 * last report counted. This is how a test lets time pass to show that nothing (more) happens.
 */
export async function waitForSweeps(t: TestTriad, n: number, o: { supervisorId?: string; timeoutMs?: number } = {}): Promise<SupervisorReport> {
  const since = Date.now();
  const counted = new Set<string>();
  let last: SupervisorReport | undefined;
  return waitFor(
    async () => {
      const { leader, reports } = await supervisorReports(t);
      const id = o.supervisorId ?? leader?.id;
      const r = reports.find((x) => x.supervisorId === id && (o.supervisorId !== undefined || x.leading));
      if (r) last = r;
      if (r && r.at >= since) counted.add(`${r.supervisorId}@${r.at}`);
      return counted.size >= n + 1 ? r : undefined;
    },
    {
      timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      intervalMs: 10,
      what: `${n} sweeps of ${o.supervisorId ?? 'the supervisor leader'} begun after ${new Date(since).toISOString()}`,
      lastSeen: () => `${Math.max(0, counted.size - 1)} counted; last report ${last ? JSON.stringify(last) : 'none'}`,
    },
  );
}
