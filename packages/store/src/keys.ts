/**
 * Every Redis key Triad uses, built here and nowhere else (decision 0015). A namespace's tasks are spread
 * over BUCKETS buckets by a hash of the task id; every key of a bucket carries the hash tag `{<ns>:bNN}`,
 * so a transition — one task and its bucket's indexes — touches one Redis Cluster slot. Workflow
 * definitions share the `{<ns>:wf}` slot, schedules the `{<ns>:sch}` slot, the supervisors' election the
 * `{<ns>:sup}` slot, the submission rate limits the `{<ns>:intake}` slot, the registry of dispatch limits
 * the `{<ns>:limits}` slot, and each limited agent type's limiter a `{<ns>:lim:<agent>}` slot of its own. Every key
 * stays under `triad:<ns>:` (the ACL pattern of decision 0011). Scripts receive every key in KEYS.
 */
import { NameSchema, NamespaceSchema } from '@triad/protocol';

/** A limiter's keys after its hash tag, in the order of _limiter.lua's KEYS. */
export const LIMITER_PARTS = ['cfg', 'tickets', 'line', 'ring:1', 'ring:2', 'ring:3', 'ring:4', 'ring:5', 'inring', 'promote', 'inflight', 'keyState', 'blocked', 'idle', 'state', 'gps', 'waitIdx'] as const;

/** The number of buckets: part of the layout, not a setting (changing it moves every task). */
export const BUCKETS = 64;

/** The keys of one bucket, all in one hash slot. */
export interface BucketKeys {
  readonly index: number;
  /** The bucket's hash tag, `{<ns>:bNN}`. */
  readonly tag: string;
  /** Task hashes of this bucket are `taskPrefix + taskId` (scripts that walk an index build them so). */
  readonly taskPrefix: string;
  /** Tasks by createdAt. */
  readonly tasks: string;
  /** Deadlines (`<taskId>|<step>` by completeBy). */
  readonly deadlines: string;
  /** Finished tasks by finishedAt (retention). */
  readonly finished: string;
  /**
   * Finished tasks that can never be retried (completed, compensated, cancelled), by finish time, until
   * retention compacts their record (decision 0007).
   */
  readonly compact: string;
  /** Open operator alerts of this bucket's tasks (hash id → alert JSON). */
  readonly alerts: string;
  /**
   * Alerts recorded by a transition, waiting for the leader supervisor to publish them to the ALERTS
   * stream (zset of alert JSON by raisedAt; decision 0009).
   */
  readonly alertOutbox: string;
  /** The highest supervisor epoch this bucket has seen: its fence (decision 0015). */
  readonly epoch: string;
  /**
   * The search index of this bucket's tagged tasks (decision 0021 §1.2): a sorted set of score 0 whose
   * members `<kind>␟<value>␟<createdAt, 13 digits>␟<taskId>` (␟ = 0x1F) index each tag, status, workflow
   * and client; read by querySearch.lua.
   */
  readonly search: string;
}

export interface Keys {
  readonly prefix: string;
  readonly buckets: readonly BucketKeys[];
  /** The bucket a task lives in. */
  forTask(taskId: string): BucketKeys;
  task(taskId: string): string;
  workflow(name: string): string;
  readonly workflows: string;
  readonly supervisorLeader: string;
  /** The leadership lease Redlock holds (on the state store, or on each TRIAD_REDLOCK_URLS instance). */
  readonly supervisorLock: string;
  /** The epoch counter the election increments (the `sup` slot); buckets keep their own fences. */
  readonly supervisorEpoch: string;
  readonly supervisorStatus: string;
  /** The object GC's checkpoints (hash: bucket → last stream sequence walked; decision 0021 §4.6). */
  readonly objectGc: string;
  /** A Redlock lease on part of a task (`task`: a scheduler's operation), in the task's bucket. */
  lease(taskId: string, what: string): string;
  /** The submission rate limits an operator set (hash: client id or `*` → JSON), in the `{<ns>:intake}` slot (decision 0022). */
  readonly intakeLimits: string;
  /** One client's rate-limit state (takeIntakeSlot.lua), in the same slot. */
  intakeState(client: string): string;
  /** A bulk operation's record (hash), in the `{<ns>:ops}` slot (decision 0021 §2.2). */
  op(id: string): string;
  /** The prefix of the operations' records (startOp.lua drops old ones by it). */
  readonly opPrefix: string;
  /** The bulk operations by creation time (zset id → createdAt), in the same slot. */
  readonly ops: string;
  /** A schedule's record (hash), in the `{<ns>:sch}` slot (decision 0019 §6.2). */
  schedule(name: string): string;
  /** Every schedule's name (set; paused ones included). */
  readonly scheduleNames: string;
  /** Schedules not paused, by their next tick (zset name → epoch ms): the leader reads the due ones in O(due). */
  readonly schedulesDue: string;
  /** Submissions a fire recorded and the leader has not yet published (hash `<client>|<taskId>` → submission bytes). */
  readonly scheduleOutbox: string;
  /** The `sch` slot's supervisor fence (decision 0015's rule, as each bucket's). */
  readonly scheduleEpoch: string;
  /** The registry of limited agent types, in the `{<ns>:limits}` slot (decision 0020 §1.6). */
  readonly limits: LimitRegistryKeys;
  /** One agent type's dispatch limiter, in its own `{<ns>:lim:<agent>}` slot (decision 0020 §1.6). */
  limiter(agent: string): LimiterKeys;
}

export interface LimitRegistryKeys {
  /** Hash: agent → its entry (a limit, a pause-only `{pausedUntil}`, or `{draining: true}`). */
  readonly agents: string;
  /** Incremented by every change of `agents`: what each process's LimitCache polls. */
  readonly version: string;
}

/** The keys of one agent type's limiter, in the order its scripts take them as KEYS (_limiter.lua). */
export interface LimiterKeys {
  readonly tag: string;
  readonly all: readonly string[];
}

/** FNV-1a, 32 bit, of the UTF-8 bytes of `s`. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The bucket of a task id (0 … BUCKETS-1). */
export function bucketOf(taskId: string): number {
  return fnv1a(taskId) % BUCKETS;
}

const cache = new Map<string, Keys>();

export function keys(namespace: string): Keys {
  const hit = cache.get(namespace);
  if (hit) return hit;
  const ns = NamespaceSchema.parse(namespace);
  const prefix = `triad:${ns}`;
  const buckets: BucketKeys[] = [];
  for (let i = 0; i < BUCKETS; i++) {
    const tag = `{${ns}:b${String(i).padStart(2, '0')}}`;
    const b = `${prefix}:${tag}`;
    buckets.push({
      index: i,
      tag,
      taskPrefix: `${b}:task:`,
      tasks: `${b}:tasks`,
      deadlines: `${b}:deadlines`,
      finished: `${b}:finished`,
      compact: `${b}:compact`,
      alerts: `${b}:alerts`,
      alertOutbox: `${b}:alerts:outbox`,
      epoch: `${b}:epoch`,
      search: `${b}:search`,
    });
  }
  const forTask = (taskId: string): BucketKeys => buckets[bucketOf(taskId)] as BucketKeys;
  const wf = `${prefix}:{${ns}:wf}`;
  const sup = `${prefix}:{${ns}:sup}`;
  const intake = `${prefix}:{${ns}:intake}`;
  const ops = `${prefix}:{${ns}:ops}`;
  const sch = `${prefix}:{${ns}:sch}`;
  const limitsSlot = `${prefix}:{${ns}:limits}`;
  const limiters = new Map<string, LimiterKeys>();
  const limiter = (agent: string): LimiterKeys => {
    const hit = limiters.get(agent);
    if (hit) return hit;
    const name = NameSchema.parse(agent);
    const tag = `{${ns}:lim:${name}}`;
    const b = `${prefix}:${tag}`;
    const l: LimiterKeys = { tag, all: LIMITER_PARTS.map((part) => `${b}:${part}`) };
    limiters.set(agent, l);
    return l;
  };
  const k: Keys = {
    prefix,
    buckets,
    forTask,
    task: (taskId) => `${forTask(taskId).taskPrefix}${taskId}`,
    workflow: (name) => `${wf}:wf:${name}`,
    workflows: `${wf}:workflows`,
    supervisorLeader: `${sup}:leader`,
    supervisorLock: `${sup}:lock`,
    supervisorEpoch: `${sup}:epoch`,
    supervisorStatus: `${sup}:status`,
    objectGc: `${sup}:objgc`,
    lease: (taskId, what) => `${prefix}:${forTask(taskId).tag}:lease:${taskId}:${what}`,
    intakeLimits: `${intake}:limits`,
    intakeState: (client) => `${intake}:client:${client}`,
    op: (id) => `${ops}:op:${id}`,
    opPrefix: `${ops}:op:`,
    ops: `${ops}:ops`,
    schedule: (name) => `${sch}:schedule:${name}`,
    scheduleNames: `${sch}:names`,
    schedulesDue: `${sch}:due`,
    scheduleOutbox: `${sch}:outbox`,
    scheduleEpoch: `${sch}:epoch`,
    limits: { agents: `${limitsSlot}:agents`, version: `${limitsSlot}:version` },
    limiter,
  };
  cache.set(namespace, k);
  return k;
}

/** The step part of a task's own deadline in the deadline index (`#` cannot occur in a step name). */
export const TASK_DEADLINE_STEP = '#task';
/** The deadline index member a finished child task's notice to its parent uses (`<childId>|#parent`; decision 0019 §5.3). */
export const PARENT_NOTICE_STEP = '#parent';
/** The deadline index member of a task admitted but not yet started (`<taskId>|#admit`; decision 0024). */
export const ADMIT_STEP = '#admit';

/**
 * A client's admission keys in a bucket (decision 0024), built by the Lua fragment _admission.lua from the
 * task key: the set of its started, unended tasks, the queue of those waiting (zset by arrival) and the
 * share of its cap the queue was built with.
 */
export function admissionKeys(b: BucketKeys, client: string): { active: string; waiting: string; cap: string } {
  const p = `${b.taskPrefix.slice(0, -'task:'.length)}adm:`;
  return { active: `${p}a:${client}`, waiting: `${p}w:${client}`, cap: `${p}c:${client}` };
}

/** A client's cap on active tasks as each bucket applies it: its share, rounded up (decision 0024). */
export function admissionShare(maxActive: number): number {
  return maxActive > 0 ? Math.ceil(maxActive / BUCKETS) : 0;
}

/** Reads a deadline index member, `<taskId>|<step>` (written by the Lua deadline_member; neither part may contain "|"). */
export function parseDeadlineMember(member: string): { taskId: string; step: string } | undefined {
  const i = member.lastIndexOf('|');
  if (i <= 0) return undefined;
  return { taskId: member.slice(0, i), step: member.slice(i + 1) };
}
