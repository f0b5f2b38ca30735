/**
 * A task record (the hash `triad:<ns>:{<ns>:bNN}:task:<id>`, decision 0015) read back as the TaskState clients and operators
 * see, in both shapes the store keeps: the full record of a running or recently finished task, and the
 * compact record retention leaves of a finished one that can never be retried (compactFinished.lua,
 * decision 0007). No I/O: the caller reads the hash and, for a compact record, the task's pinned plan
 * (from the workflow store, since the compact record no longer carries it).
 */
import { ErrorCode, StepStatusSchema, TriadError, unpackTrusted, type StepState, type StepStatus, type TaskState } from '@triad/protocol';
import type { PlanStep } from '@triad/core';

/** A task hash as HGETALL returns it with Buffer values (outputs and input are msgpack). */
export type TaskHash = Record<string, Buffer>;

/** A step's compensation inside its full step record (`comp`). */
export interface CompensationRecord {
  attempt: number;
  failureCount: number;
  completeBy?: number;
  lockedBy?: string;
  startedAt?: number;
  finishedAt?: number;
  error?: string;
  parked?: boolean;
  circuitCount?: number;
  giveUpAt?: number;
  /** Set while a reported failure waits for the supervisor's decision. */
  reported?: boolean;
  /** Why its last park happened: an open breaker or the ladder's long back-off (decision 0021 §3.2). */
  parkedFor?: 'breaker' | 'backoff';
}

/** What a phase waiting for a dispatch limit keeps (decision 0020 §2.1; written by the Lua transitions). */
interface QueueView {
  a: string;
  k?: string;
  p: number;
  since: number;
  f: number;
  why?: 'limit' | 'throttled';
}

/** The full step record, JSON in the field `s:<step>` (decision 0001). */
export interface StepRecord {
  status: StepStatus;
  attempt: number;
  failureCount: number;
  completeBy?: number;
  lockedBy?: string;
  startedAt?: number;
  finishedAt?: number;
  error?: string;
  /** Why a skipped step was skipped (decision 0019). */
  reason?: string;
  /** A sleeping step's wake time (decision 0019). */
  wakeAt?: number;
  /** How many times the step failed at its start, before any attempt (its alert ids count them). */
  startFailures?: number;
  /** A waiting step's timeout; the signal it consumed; how many times it began to wait (decision 0019). */
  timeoutAt?: number;
  signalId?: string;
  waits?: number;
  order?: number;
  circuitCount?: number;
  giveUpAt?: number;
  /** Why its last park happened (decision 0021 §3.2). */
  parkedFor?: 'breaker' | 'backoff';
  /** What is known of the run's remote effect (decision 0009); absent = none. */
  effect?: 'none' | 'unknown' | 'applied';
  /** Set while a reported failure waits for the supervisor's decision. */
  reported?: boolean;
  comp?: CompensationRecord;
  /** A child step's child (decision 0019 §5): its id, the last operation asked of it, timeout, how it ended. */
  child?: { id: string; op: 'start' | 'cancel' | 'undo'; sent?: number; next?: number; timeoutAt?: number; timedOut?: boolean; ended?: string };
  /** A fan-out step's counters (decision 0019 §4): elements, next to start, highest started + 1, started and not ended, processed. */
  fe?: { n: number; next: number; hi?: number; live?: number[]; done: number };
}

/** What an element's status counts as in a fan-out step's `items` (decision 0019 §7). */
const ELEMENT_COUNT: Partial<Record<string, 'running' | 'done' | 'failed'>> = {
  processing: 'running',
  parked: 'running',
  processed: 'done',
  compensating: 'done',
  compensated: 'done',
  failed: 'failed',
  error: 'failed',
  compensation_failed: 'failed',
};

/** A fan-out step's elements by status, read from their records (`s:<step>#<i>`; one never started is pending). */
function itemsOf(str: (f: string) => string | undefined, step: string, fe: NonNullable<StepRecord['fe']>): NonNullable<StepState['items']> {
  const items = { count: fe.n, pending: 0, running: 0, done: 0, failed: 0 };
  for (let i = 0; i < fe.n; i++) {
    const raw = i < (fe.hi ?? fe.n) ? str(`s:${step}#${i}`) : undefined;
    const status = raw === undefined ? 'pending' : (JSON.parse(raw) as { status?: string }).status ?? 'pending';
    items[ELEMENT_COUNT[status] ?? 'pending']++;
  }
  return items;
}

/** The field that marks a compact record (its value is the format, "1"). */
export const COMPACTED_FIELD = 'c';

export function isCompacted(h: TaskHash): boolean {
  return h[COMPACTED_FIELD] !== undefined;
}

function reader(h: TaskHash) {
  const str = (f: string): string | undefined => h[f]?.toString('utf8');
  const num = (f: string): number | undefined => {
    const v = str(f);
    return v === undefined || v === '' ? undefined : Number(v);
  };
  return { str, num };
}

/** The state of a task from its full record. */
/** What a step's state has in both record forms: its place in the plan, counters, times, output. */
/** The wire kind of a plan step (decision 0019 §7): agent calls carry none (older readers: agent). */
const KIND_OF: Record<NonNullable<PlanStep['k']>, NonNullable<StepState['kind']>> = { s: 'sleep', w: 'signal', c: 'child' };

function stepState(
  p: Pick<PlanStep, 'n' | 'a' | 'd' | 'k' | 'ws'>,
  rec: { status: StepStatus; attempt: number; failureCount: number; startedAt?: number; finishedAt?: number; order?: number },
  output: Buffer | undefined,
): StepState {
  const s: StepState = {
    name: p.n,
    agent: p.a ?? '',
    status: rec.status,
    attempt: rec.attempt,
    failureCount: rec.failureCount,
    dependsOn: Array.isArray(p.d) ? p.d : [],
  };
  if (p.k !== undefined && KIND_OF[p.k]) s.kind = KIND_OF[p.k];
  if (p.ws) s.signal = p.ws.s;
  if (rec.startedAt !== undefined) s.startedAt = rec.startedAt;
  if (rec.finishedAt !== undefined) s.finishedAt = rec.finishedAt;
  if (rec.order !== undefined) s.order = rec.order;
  if (output) s.output = unpackTrusted(output);
  return s;
}

export function fullTaskView(taskId: string, h: TaskHash): TaskState {
  const { str, num } = reader(h);
  const plan = JSON.parse(str('plan') ?? '[]') as PlanStep[];
  const steps: StepState[] = plan.map((p) => {
    const rec = JSON.parse(str(`s:${p.n}`) ?? '{"status":"pending","attempt":0,"failureCount":0}') as StepRecord;
    const out = h[`o:${p.n}`];
    const s = stepState(p, rec, out);
    if (rec.lockedBy) s.lockedBy = rec.lockedBy;
    if (rec.completeBy !== undefined) s.completeBy = rec.completeBy;
    if (rec.error) s.error = rec.error;
    if (rec.reason) s.reason = rec.reason;
    if (rec.status === 'sleeping' && rec.wakeAt !== undefined) s.until = rec.wakeAt;
    if (rec.status === 'waiting' && rec.timeoutAt !== undefined) s.until = rec.timeoutAt;
    if (rec.signalId) s.signalId = rec.signalId;
    if (rec.child && p.ch) {
      s.child = { taskId: rec.child.id, workflow: p.ch.w, op: rec.child.op };
      if (p.ch.v !== undefined) s.child.version = p.ch.v;
      if (rec.child.ended) s.child.ended = rec.child.ended;
      if (rec.status === 'waiting' && rec.child.op === 'start' && rec.child.timeoutAt !== undefined && !rec.child.timedOut) s.until = rec.child.timeoutAt;
    }
    if (rec.fe && typeof rec.fe.n === 'number') s.items = itemsOf(str, p.n, rec.fe);
    if (rec.circuitCount) s.circuitCount = rec.circuitCount;
    if (rec.giveUpAt !== undefined) s.giveUpAt = rec.giveUpAt;
    if (rec.status === 'parked' && rec.parkedFor) s.parkedFor = rec.parkedFor;
    s.effect = rec.effect ?? 'none';
    const queueOf = (q: QueueView | undefined) => (q ? { agent: q.a, ...(q.k ? { key: q.k } : {}), priority: q.p, since: q.since, firstAt: q.f, why: q.why ?? 'limit' } : undefined);
    const rq = rec.status === 'queued' ? queueOf((rec as { q?: QueueView }).q) : undefined;
    if (rq) s.queue = rq;
    const waited = (rec as { waitedMs?: number }).waitedMs;
    if (waited) s.waitedMs = waited;
    if (rec.comp && (p.c || p.k === 'c')) {
      // A child step's compensation is its child's undo (decision 0019 U7): no agent.
      const c = rec.comp;
      s.compensation = { agent: p.c?.a ?? '', attempt: c.attempt, failureCount: c.failureCount };
      if (c.completeBy !== undefined) s.compensation.completeBy = c.completeBy;
      if (c.lockedBy) s.compensation.lockedBy = c.lockedBy;
      if (c.startedAt !== undefined) s.compensation.startedAt = c.startedAt;
      if (c.finishedAt !== undefined) s.compensation.finishedAt = c.finishedAt;
      if (c.error) s.compensation.error = c.error;
      if (c.parked) s.compensation.parked = true;
      if (c.parked && c.parkedFor) s.compensation.parkedFor = c.parkedFor;
      if (c.circuitCount) s.compensation.circuitCount = c.circuitCount;
      if (c.giveUpAt !== undefined) s.compensation.giveUpAt = c.giveUpAt;
      const cq = (c as { queued?: boolean; q?: QueueView }).queued ? queueOf((c as { q?: QueueView }).q) : undefined;
      if (cq) s.compensation.queue = cq;
    }
    return s;
  });
  const state: TaskState = {
    taskId,
    workflow: str('workflow') ?? '',
    version: num('version') ?? 0,
    status: str('status') ?? 'running',
    input: h['input'] && h['input'].length > 0 ? unpackTrusted(h['input']) : undefined,
    lockEpoch: num('lockEpoch') ?? 0,
    seq: num('seq') ?? 0,
    createdAt: num('createdAt') ?? 0,
    updatedAt: num('updatedAt') ?? 0,
    steps,
  };
  const lockedBy = str('lockedBy');
  if (lockedBy) state.lockedBy = lockedBy;
  const queue = str('sq');
  if (queue) {
    const q = JSON.parse(queue) as { id: string; name: string; at: number; by: string }[];
    if (Array.isArray(q) && q.length > 0) state.signals = q.map((x) => ({ name: x.name, signalId: x.id, at: x.at, by: x.by }));
  }
  const finishedAt = num('finishedAt');
  if (finishedAt !== undefined) state.finishedAt = finishedAt;
  const deadlineAt = num('deadlineAt');
  if (deadlineAt !== undefined) state.deadlineAt = deadlineAt;
  const client = str('client');
  if (client) state.client = client;
  const priority = num('priority');
  if (priority !== undefined) state.priority = priority;
  const error = str('error');
  if (error) state.error = error;
  const tags = parseTags(str('tags'));
  if (tags) state.tags = tags;
  const parent = str('parent');
  if (parent) state.parent = { taskId: parent, step: str('parentStep') ?? '' };
  if (h['out'] && h['out'].length > 0) state.output = unpackTrusted(h['out']);
  return state;
}

/** A task's stored tags (canonical JSON, decision 0021), or undefined. */
export function parseTags(json: string | undefined | null): Record<string, string> | undefined {
  if (!json) return undefined;
  const v = JSON.parse(json) as unknown;
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string>) : undefined;
}

/** One step of a compact record: `k:<step>` = `status|attempt|failureCount|startedAt|finishedAt[|order|compAttempt|compFailureCount|compStartedAt|compFinishedAt]`. */
export interface CompactStep {
  status: StepStatus;
  attempt: number;
  failureCount: number;
  startedAt?: number;
  finishedAt?: number;
  order?: number;
  comp?: { attempt: number; failureCount: number; startedAt?: number; finishedAt?: number };
}

/**
 * Parses a compact step record; its times are ms since the task's `createdAt`. Throws INTERNAL, naming
 * the task, step and text, when the record is not one compactFinished.lua writes.
 */
export function parseCompactStep(text: string, createdAt: number, where: { taskId: string; step: string }): CompactStep {
  const malformed = (why: string): TriadError =>
    new TriadError(
      ErrorCode.Internal,
      `task ${where.taskId}: the compact record of step ${where.step} ("${text}") is malformed (${why}); it was not written by this version's compactFinished.lua — inspect it with redis-cli HGETALL and report it`,
    );
  const parts = text.split('|');
  const status = StepStatusSchema.safeParse(parts[0]);
  if (!status.success) throw malformed(`unknown status "${parts[0] ?? ''}"`);
  const int = (i: number, what: string): number | undefined => {
    const v = parts[i];
    if (v === undefined || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n)) throw malformed(`${what} "${v}" is not a whole number`);
    return n;
  };
  const time = (i: number, what: string): number | undefined => {
    const v = int(i, what);
    return v === undefined ? undefined : createdAt + v;
  };
  const step: CompactStep = { status: status.data, attempt: int(1, 'attempt') ?? 0, failureCount: int(2, 'failureCount') ?? 0 };
  const startedAt = time(3, 'startedAt');
  if (startedAt !== undefined) step.startedAt = startedAt;
  const finishedAt = time(4, 'finishedAt');
  if (finishedAt !== undefined) step.finishedAt = finishedAt;
  const order = int(5, 'order');
  if (order !== undefined) step.order = order;
  const compAttempt = int(6, 'compensation attempt');
  if (compAttempt !== undefined) {
    const comp: NonNullable<CompactStep['comp']> = { attempt: compAttempt, failureCount: int(7, 'compensation failureCount') ?? 0 };
    const cs = time(8, 'compensation startedAt');
    if (cs !== undefined) comp.startedAt = cs;
    const cf = time(9, 'compensation finishedAt');
    if (cf !== undefined) comp.finishedAt = cf;
    step.comp = comp;
  }
  return step;
}

/**
 * The state of a task from its compact record. Step names, agents, dependencies and order come from the
 * task's pinned plan; when that workflow version is no longer stored (`plan` undefined), the steps are
 * listed in the record's own order (the plan's, as compaction wrote them) with an empty agent and no
 * dependencies.
 */
export function compactTaskView(taskId: string, h: TaskHash, plan: readonly PlanStep[] | undefined): TaskState {
  const { str, num } = reader(h);
  const createdAt = num('createdAt') ?? 0;
  const finishedAt = num('finishedAt');
  const specs: readonly Pick<PlanStep, 'n' | 'a' | 'd' | 'c' | 'k' | 'fe'>[] =
    plan ??
    Object.keys(h)
      .filter((f) => f.startsWith('k:'))
      .map((f) => ({ n: f.slice(2), a: '', d: [] }));
  const steps: StepState[] = specs.map((p) => {
    const text = str(`k:${p.n}`);
    const rec: CompactStep = text === undefined ? { status: 'pending', attempt: 0, failureCount: 0 } : parseCompactStep(text, createdAt, { taskId, step: p.n });
    const s = stepState(p, rec, h[`o:${p.n}`]);
    // A compact record keeps no element records; a processed fan-out step's elements all ended done, one
    // output each, so its counts are its output's length (decision 0019 §19).
    if (p.fe !== undefined && rec.status === 'processed' && Array.isArray(s.output)) s.items = { count: s.output.length, pending: 0, running: 0, done: s.output.length, failed: 0 };
    const error = str(`e:${p.n}`);
    if (error) s.error = error;
    const reason = str(`r:${p.n}`);
    if (reason) s.reason = reason;
    if (rec.comp) {
      const compError = str(`ce:${p.n}`);
      s.compensation = { agent: p.c?.a ?? '', ...rec.comp, ...(compError ? { error: compError } : {}) };
    }
    return s;
  });
  const state: TaskState = {
    taskId,
    workflow: str('workflow') ?? '',
    version: num('version') ?? 0,
    status: str('status') ?? 'completed',
    input: h['input'] && h['input'].length > 0 ? unpackTrusted(h['input']) : undefined,
    lockEpoch: 0,
    seq: num('seq') ?? 0,
    createdAt,
    updatedAt: finishedAt ?? createdAt,
    steps,
    compacted: true,
  };
  if (finishedAt !== undefined) state.finishedAt = finishedAt;
  const error = str('error');
  if (error) state.error = error;
  const client = str('client');
  if (client) state.client = client;
  const tags = parseTags(str('tags'));
  if (tags) state.tags = tags;
  const parent = str('parent');
  if (parent) state.parent = { taskId: parent, step: str('parentStep') ?? '' };
  return state;
}
