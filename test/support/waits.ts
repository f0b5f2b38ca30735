// Waits on a test Triad's observable state — a step's record, the tasks in flight, the supervisors'
// reports — so fault tests act and assert when the state they need is there, not after a guessed time.
// Everything is read from the state store, so a wait still works while a scheduler or NATS is down.
import type { SupervisorReport } from '@triad/client';
import type { RemoteService } from '@triad/example-orders';
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

/**
 * The service a step's agent calls, in a test Triad: the example's services are named like their
 * agents; the saga worker calls the ledger.
 */
function serviceOf(t: TestTriad, agent: string): RemoteService | undefined {
  if (agent === 'worker') return t.ledger;
  return (t.services as Record<string, RemoteService | undefined>)[agent];
}

/**
 * The step's current attempt is at an agent, mid-call: its service holds a call for the step's key
 * (agents hold no claim in Redis, decision 0010; the service is where a call can be seen arriving).
 * Needs the service to hold calls (latency or hang faults).
 */
export function callWaiting(t: TestTriad, taskId: string, s: StepState, kind: 'run' | 'compensate' = 'run'): boolean {
  const agent = kind === 'compensate' ? s.compensation?.agent : s.agent;
  const service = agent !== undefined ? serviceOf(t, agent) : undefined;
  const key = `${t.namespace}/${taskId}/${s.name}${kind === 'compensate' ? '/compensate' : ''}`;
  const status = kind === 'compensate' ? 'compensating' : 'processing';
  return s.status === status && service !== undefined && service.waiting().some((c) => c.idempotencyKey === key);
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

/**
 * Waits until an agent is mid-step: its call for the step (or, with kind 'compensate', for the step's
 * undo) is held by the service (which must be slow or hanging); resolves with the step's state.
 */
export function waitForCall(t: TestTriad, taskId: string, step: string, o: { kind?: 'run' | 'compensate'; timeoutMs?: number } = {}): Promise<StepState> {
  const kind = o.kind ?? 'run';
  return waitForStep(t, taskId, step, (s) => callWaiting(t, taskId, s, kind), `an agent's ${kind === 'run' ? 'call' : 'undo call'} to be held by its service`, o.timeoutMs);
}

/** The states of the tasks of `ids` that exist (a submission not yet taken by a scheduler has none). */
export async function taskStates(t: TestTriad, ids: readonly string[]): Promise<TaskState[]> {
  const s = store(t);
  return (await Promise.all(ids.map((id) => s.getTask(id)))).filter((x) => x !== undefined);
}

/** The tasks of `ids` whose work is under way at an agent: running, with a step whose call its service holds. */
export async function tasksInFlight(t: TestTriad, ids: readonly string[]): Promise<TaskState[]> {
  return (await taskStates(t, ids)).filter((x) => x.status === 'running' && x.steps.some((s) => callWaiting(t, x.taskId, s)));
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
      what: `${atLeast} of ${ids.length} tasks to be in flight (running, a step's call held by its service)`,
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
