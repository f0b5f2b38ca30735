/** The task state store: task and step records in Redis, changed only through the Lua transitions. */
import type { RedisClient } from './client.js';
import {
  DEFAULT_CLIENT_ID,
  DEFAULT_PRIORITY,
  ErrorCode,
  TriadError,
  errorMessage,
  type Alert,
  type FailurePolicy,
  type TaskState,
  type TaskStatus,
  type TaskSummary,
} from '@triad/protocol';
import type { PlanStep } from '@triad/core';
import { admissionKeys, admissionShare, keys, parseDeadlineMember, type BucketKeys, type Keys } from './keys.js';
import { fenceBuckets } from './fence.js';
import type { LeaseClaim } from './leases.js';
import { ScriptCode, scriptError } from './codes.js';
import { runScript } from './scripts.js';
import { childInputKey, elementValueKey, parseBody, parseExpiry, parseTransition, type ChildOp, type Dispatch, type Expiry, type QueuedPhase, type Transition } from './transitions.js';
import { LimitStore, type LimitCache } from './limit-store.js';
import { compactTaskView, fullTaskView, isCompacted, type StepRecord, type TaskHash } from './task-view.js';
import { WorkflowStore } from './workflow-store.js';
import { TaskSearch, canonicalTags, type CountResult, type QueryResult, type TaskFilter } from './search.js';

export interface CreateTaskArgs {
  /** The scheduler's task lease (taken inside the transition). */
  lease: LeaseClaim;
  taskId: string;
  workflow: string;
  version: number;
  input: Uint8Array;
  replyTo?: string;
  plan: PlanStep[];
  /** `plan` as JSON, when the caller has it already (WorkflowStore.compiled): not serialised again. */
  planJson?: string;
  onFailure: FailurePolicy;
  /** The workflow's deadlineMs: the task is stopped this long after it is accepted (decision 0009). */
  deadlineMs?: number;
  /** The submitting client, from the submission's subject (decision 0010). */
  client: string;
  /** The submission's priority (1 highest … 5); stored only when not the default 3 (decision 0020). */
  priority?: number;
  /** Search attributes (decision 0021), validated by the caller; a task with none is not indexed. */
  tags?: Readonly<Record<string, string>>;
  /** The objects the task owns from the start (its input's, decision 0021 §4.6): deleted with the task. */
  objects?: readonly string[];
  /**
   * The client's cap on its active tasks (decision 0024; 0 or absent = none): each bucket applies its share,
   * `admissionShare(maxActive)`; a task over it is stored and waits for admission (`Transition.admit` of a
   * later transition names it when it may start).
   */
  maxActive?: number;
  now: number;
  schedulerId: string;
}

/**
 * The default cap on a client's active tasks (TRIAD_CLIENT_ACTIVE_TASKS; decision 0024): 0, off. A task that
 * waits for a signal, a sleep or a child counts as active, so any default cap would let a client's waiting
 * tasks hold back its new ones; an operator turns it on for a multi-tenant deployment.
 */
export const DEFAULT_CLIENT_ACTIVE_TASKS = 0;

/** Not created: the id exists, with this status, submitted by `client`. */
export type CreateOutcome = { created: true; transition: Transition } | { created: false; status: TaskStatus; client: string };

/** The objects a purged task owned, in its client's bucket (decision 0021 §4.6). */
export interface PurgedObjects {
  client: string;
  names: string[];
}

export interface ApplyResultArgs {
  lease: LeaseClaim;
  taskId: string;
  step: string;
  kind: 'run' | 'compensate';
  attempt: number;
  now: number;
  schedulerId: string;
  /** The instance that ran the attempt (the result's agentId). */
  agentId: string;
  /** The agent type whose result subject the result came on: it must be the step's (decision 0010). */
  agentType: string;
  /** The fan-out element the result is for (the result's `item`; decision 0019 §4). */
  item?: number;
  /**
   * The object an output reference points to (decision 0021 §4.5), its name checked by the caller against
   * this result's step attempt; the script checks the client is the task's and records it in `objs`.
   */
  outputObject?: { client: string; name: string };
  outcome:
    | { ok: true; output: Uint8Array }
    | {
        ok: false;
        message: string;
        retryable: boolean;
        circuitOpenRetryAfterMs?: number;
        /** The service throttled the call (HTTP 429 / 503 with Retry-After): its retry-after ms (decision 0020 §5). */
        throttledRetryAfterMs?: number;
        /** What the agent knows of the remote effect: 'none' = no try can have taken effect (decision 0009). */
        effect: 'none' | 'unknown';
      };
}

/**
 * Not applied: stale (fenced by the attempt), or `forged` (from another agent type than the step's). A
 * stale result for an attempt that held a permit lists it in `release` (decision 0020 Q12).
 */
export type ApplyOutcome = { applied: true; transition: Transition } | { applied: false; reason: string; forged?: true; release?: { agent: string; ticket: string }[] };

/** What startQueued did (decision 0020 Q4, Q10, Q11). */
export type StartQueuedOutcome =
  | { started: true; transition: Transition }
  | { started: false; why: 'stale'; release: boolean; reason: string }
  | { started: false; why: 'late' }
  | { started: false; why: 'gone' };

/**
 * A bulk operation's act (decision 0021 §2.3): at most once per operation per task (AlreadyAppliedError
 * on a repeat), only on a task created at or before `createdBefore` and still `expectStatus` (else
 * INVALID_STATE with the reason) — checked atomically with the act.
 */
export interface BulkFence {
  id: string;
  expectStatus: TaskStatus;
  createdBefore: number;
}

/** A child step's link (decision 0019 §5.1): the parent task, its step, the phase and its attempt. */
export interface ChildLink {
  parentId: string;
  parentStep: string;
  kind: 'run' | 'compensate';
  attempt: number;
  /** Until when the child must stay undoable (kept from retention): the parent's bound. */
  holdUntil: number;
}

export interface StartChildArgs {
  lease: LeaseClaim;
  childId: string;
  link: ChildLink;
  /** The child's workflow and plan; absent when it cannot be started (`reason`): a cancelled stub records why. */
  workflow: string;
  version: number;
  plan?: PlanStep[];
  planJson?: string;
  onFailure?: FailurePolicy;
  deadlineMs?: number;
  input: Uint8Array;
  /** The parent's client: the child is its task too. */
  client: string;
  reason?: string;
  now: number;
  schedulerId: string;
}

/** A child operation's result: a transition to publish (the child's events and requests), or none. */
export type ChildOutcome = { applied: true; action: string; transition: Transition } | { applied: false; action: 'exists'; status: TaskStatus };

/** A notice delivered (decision 0019 §5.3): the parent's transition, for the supervisor to act on. */
export interface NoticeDelivery {
  parentId: string;
  step: string;
  childId: string;
  childStatus: string;
  expiry: Expiry;
}

export interface StoreOptions {
  /** Replicas that must acknowledge a task's creation (TRIAD_REDIS_WAIT_REPLICAS; default 0 = no WAIT). */
  waitReplicas?: number;
  /** How long WAIT waits for them, ms (TRIAD_REDIS_WAIT_MS; default 1000). */
  waitMs?: number;
  /** The process's workflow store (its one cache of versions and plans); default: a new one on the same Redis. */
  workflows?: WorkflowStore;
  /**
   * The dispatch limits (decision 0020 §1.9): each transition that can start a step gets their limited
   * table. Without it no step is ever queued (and no Redis call is made for limits).
   */
  limits?: LimitCache;
}

export class TaskStore {
  readonly keys: Keys;
  /** Pinned definitions and their plans: for compacted tasks (whose record no longer carries the plan) and retry commands. */
  readonly workflows: WorkflowStore;

  /** Replicas that must acknowledge a task's creation before it is confirmed (Redis WAIT, decision 0015). */
  private readonly waitReplicas: number;
  private readonly waitMs: number;
  private readonly search: TaskSearch;
  /** The dispatch limits' cache, when this process applies limits (schedulers and supervisors do). */
  readonly limits: LimitCache | undefined;
  /** The limiters' reads for `getTask`'s places when this store has no LimitCache (made on first use). */
  private placeStore: LimitStore | undefined;

  constructor(
    readonly redis: RedisClient,
    readonly namespace: string,
    options: StoreOptions = {},
  ) {
    this.keys = keys(namespace);
    this.workflows = options.workflows ?? new WorkflowStore(redis, namespace);
    this.waitReplicas = options.waitReplicas ?? 0;
    this.waitMs = options.waitMs ?? 1_000;
    this.search = new TaskSearch(redis, this.keys);
    this.limits = options.limits;
  }

  /** The limited table a transition at `now` receives ('' without limits; decision 0020 §1.9). */
  private async limited(now: number): Promise<string> {
    return this.limits ? this.limits.limitedTable(now) : '';
  }

  /** A page of tasks matching `filter`, newest first (decision 0021 §1.3); `cursor`: the previous page's `next`. */
  async queryTasks(filter: TaskFilter, limit: number, cursor?: string): Promise<QueryResult> {
    return this.search.query(filter, limit, cursor);
  }

  /** How many tasks match `filter` (exact, or a lower bound with `exact: false`). */
  async countTasks(filter: TaskFilter): Promise<CountResult> {
    return this.search.count(filter);
  }

  /**
   * Returns once `waitReplicas` replicas acknowledged every write this client's connection to `key`'s
   * primary made so far (WAIT, sent on that connection); throws UNAVAILABLE when fewer did in time.
   */
  private async replicated(key: string, what: string): Promise<void> {
    if (this.waitReplicas === 0) return;
    // A pipeline goes to the node of its keys (EXISTS names the key), so WAIT runs on that connection.
    const replies = await this.redis.pipeline().exists(key).call('WAIT', this.waitReplicas, this.waitMs).exec();
    const [err, acked] = replies?.[1] ?? [new Error('no reply'), 0];
    if (err) throw new TriadError(ErrorCode.Unavailable, `${what}: WAIT failed (${errorMessage(err)}); it is not confirmed and will be tried again`, { cause: err });
    if (Number(acked) < this.waitReplicas) {
      throw new TriadError(
        ErrorCode.Unavailable,
        `${what}: written on the primary but acknowledged by ${Number(acked)} of ${this.waitReplicas} replica(s) within ${this.waitMs} ms (TRIAD_REDIS_WAIT_REPLICAS, TRIAD_REDIS_WAIT_MS); a failover now could lose it, so it is not confirmed and will be tried again — check the replicas (INFO replication)`,
      );
    }
  }

  async createTask(a: CreateTaskArgs): Promise<CreateOutcome> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(
      this.redis,
      'createTask',
      [k.task(a.taskId), b.tasks, b.deadlines, b.finished, a.lease.key, b.compact, b.alerts, b.alertOutbox, b.search],
      [a.taskId, a.workflow, a.version, a.input, a.replyTo ?? '', a.planJson ?? JSON.stringify(a.plan), a.now, a.schedulerId, a.onFailure, a.lease.token, a.lease.ms, a.deadlineMs ?? '', a.client, a.priority === undefined || a.priority === DEFAULT_PRIORITY ? '' : a.priority, canonicalTags(a.tags), a.objects && a.objects.length > 0 ? JSON.stringify(a.objects) : '', await this.limited(a.now), admissionShare(a.maxActive ?? 0) || ''],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok && code !== ScriptCode.Exists) throw scriptError(code, `create task ${a.taskId}`);
    // Acknowledged submissions exist nowhere else: confirm the task is on a replica first (a duplicate too:
    // it may be the redelivery of one whose WAIT failed).
    await this.replicated(k.task(a.taskId), `create task ${a.taskId}`);
    if (code === ScriptCode.Exists) {
      const body = parseBody(reply[1]);
      return { created: false, status: body.status ?? 'running', client: body.client ?? DEFAULT_CLIENT_ID };
    }
    return { created: true, transition: parseTransition(reply) };
  }

  async applyResult(a: ApplyResultArgs): Promise<ApplyOutcome> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const o = a.outcome;
    const reply = (await runScript(
      this.redis,
      'applyResult',
      [k.task(a.taskId), b.deadlines, b.finished, a.lease.key, b.compact, b.alerts, b.alertOutbox, b.search],
      [
        a.taskId,
        a.step,
        a.attempt,
        o.ok ? '1' : '0',
        o.ok ? o.output : o.message,
        !o.ok && o.retryable ? '1' : '0',
        a.now,
        a.schedulerId,
        a.agentId,
        !o.ok && o.circuitOpenRetryAfterMs !== undefined ? o.circuitOpenRetryAfterMs : '',
        a.lease.token,
        a.kind,
        a.lease.ms,
        o.ok ? '' : o.effect,
        a.agentType,
        a.item ?? '',
        !o.ok && o.throttledRetryAfterMs !== undefined ? o.throttledRetryAfterMs : '',
        a.outputObject?.name ?? '',
        a.outputObject?.client ?? '',
        await this.limited(a.now),
      ],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.Stale) {
      const body = parseBody(reply[1]) as { reason?: string; release?: unknown };
      const release = Array.isArray(body.release) ? (body.release as { agent: string; ticket: string }[]) : [];
      return { applied: false, reason: body.reason ?? 'stale', ...(release.length > 0 ? { release } : {}) };
    }
    if (code === ScriptCode.Forged) return { applied: false, forged: true, reason: parseBody(reply[1]).reason ?? 'forged' };
    if (code !== ScriptCode.Ok) throw scriptError(code, `result for ${a.taskId}/${a.step}${a.item !== undefined ? ` element ${a.item}` : ''} attempt ${a.attempt}`);
    return { applied: true, transition: parseTransition(reply) };
  }

  /**
   * The whole state of a task, for clients and operators (outputs decoded from msgpack), from its full
   * record or, once retention compacted it, from the compact record and the task's pinned plan.
   */
  async getTask(taskId: string, o: { places?: boolean; now?: number } = {}): Promise<TaskState | undefined> {
    const h = await this.redis.hgetallBuffer(this.keys.task(taskId));
    if (!h['id']) return undefined;
    if (!isCompacted(h)) {
      const t = fullTaskView(taskId, h);
      if (o.places) await this.fillPlaces(t, h, o.now ?? Date.now());
      return t;
    }
    return compactTaskView(taskId, h, await this.pinnedPlan(h['workflow']?.toString('utf8') ?? '', Number(h['version']?.toString('utf8') ?? 0)));
  }

  /**
   * Each queued phase's place in its agent type's line (decision 0020 §6): one read-only `limitPlace`
   * per queued phase, only when there is one, in parallel (each limiter is its own slot). A limiter that
   * does not answer, or no longer knows the ticket, leaves the place out: the rest of the view stands.
   */
  private async fillPlaces(t: TaskState, h: TaskHash, now: number): Promise<void> {
    const reads: Promise<void>[] = [];
    for (const s of t.steps) {
      const phases = [
        { q: s.queue, kind: 'run' as const },
        { q: s.compensation?.queue, kind: 'compensate' as const },
      ];
      for (const { q, kind } of phases) {
        if (!q) continue;
        let ticket: string | undefined;
        try {
          const rec = JSON.parse(h[`s:${s.name}`]?.toString('utf8') ?? '{}') as { q?: { t?: string }; comp?: { q?: { t?: string } } };
          ticket = kind === 'run' ? rec.q?.t : rec.comp?.q?.t;
        } catch {
          ticket = undefined;
        }
        if (!ticket) continue;
        const store = this.limits?.store ?? (this.placeStore ??= new LimitStore(this.redis, this.namespace));
        reads.push(
          store.place(q.agent, ticket, now).then(
            (p) => {
              if (!p.found) return;
              if ('granted' in p) {
                q.granted = true;
                return;
              }
              q.place = p.place;
              if (p.approximate) q.placeApprox = true;
              q.level = p.level;
              if (p.pausedUntil !== undefined) q.pausedUntil = p.pausedUntil;
              if (p.blockedUntil !== undefined) q.blockedUntil = p.blockedUntil;
            },
            () => undefined,
          ),
        );
      }
    }
    await Promise.all(reads);
  }

  /**
   * A task's state if `client` submitted it, else undefined — as for a task that does not exist, so a
   * client-scoped read is no existence oracle (decision 0017). The owner is read first with one small
   * HMGET: a foreign task costs about what a missing one does. A record without `client` (before 0010)
   * belongs to `default`, as its events' subject does.
   */
  async getTaskOf(taskId: string, client: string, o: { places?: boolean; now?: number } = {}): Promise<TaskState | undefined> {
    const [id, owner] = await this.redis.hmget(this.keys.task(taskId), 'id', 'client');
    if (!id || (owner ?? DEFAULT_CLIENT_ID) !== client) return undefined;
    const t = await this.getTask(taskId, o);
    return t && (t.client ?? DEFAULT_CLIENT_ID) === client ? t : undefined;
  }

  /**
   * The plan a task ran: its pinned workflow version compiled as the scheduler compiled it (versions never
   * change once registered). Undefined when that version is not stored.
   */
  private async pinnedPlan(workflow: string, version: number): Promise<PlanStep[] | undefined> {
    return (await this.workflows.compiled(workflow, version))?.plan;
  }

  /**
   * Most recent tasks first; `status` and `client` filter (reading at most `scanLimit` recent tasks of the
   * namespace to find them, so a filtered list may hold fewer than `limit` although older matches exist:
   * each request's cost stays bounded). The tasks index is per bucket (decision 0015): each bucket's most
   * recent `scan` are read and merged.
   */
  async listTasks(opts: { status?: TaskStatus; client?: string; limit: number; scanLimit?: number }): Promise<TaskSummary[]> {
    const filtered = opts.status !== undefined || opts.client !== undefined;
    const scan = filtered ? (opts.scanLimit ?? listScanLimit(opts.limit)) : opts.limit;
    const perBucket = await Promise.all(this.keys.buckets.map((b) => this.redis.zrevrange(b.tasks, 0, scan - 1, 'WITHSCORES')));
    const recent: { id: string; at: number }[] = [];
    for (const flat of perBucket) for (let i = 0; i + 1 < flat.length; i += 2) recent.push({ id: flat[i] as string, at: Number(flat[i + 1]) });
    recent.sort((x, y) => y.at - x.at || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0));
    const ids = recent.slice(0, scan).map((r) => r.id);
    if (ids.length === 0) return [];
    // One command per task, sent together (a pipeline cannot span a cluster's slots).
    const rows = await Promise.all(
      ids.map((id) => this.redis.hmget(this.keys.task(id), 'workflow', 'version', 'status', 'createdAt', 'updatedAt', 'finishedAt', 'client').catch(() => undefined)),
    );
    const out: TaskSummary[] = [];
    rows.forEach((v, i) => {
      if (!v || v[0] === null) return;
      // A compacted record has no updatedAt: a finished task was last updated when it finished.
      const [workflow, version, status, createdAt, updatedAt, finishedAt, client] = v;
      if (opts.status && status !== opts.status) return;
      if (opts.client !== undefined && (client ?? DEFAULT_CLIENT_ID) !== opts.client) return;
      if (out.length >= opts.limit) return;
      out.push({
        taskId: ids[i] as string,
        workflow: workflow ?? '',
        version: Number(version),
        status: status as TaskStatus,
        createdAt: Number(createdAt),
        updatedAt: Number(updatedAt ?? finishedAt),
      });
    });
    return out;
  }

  /**
   * The requests a task has in flight (its processing steps, same attempt and completeBy), for a
   * scheduler that must send them again after a crash between a transition and its publishes.
   */
  async inFlight(taskId: string): Promise<Transition | undefined> {
    const h = await this.redis.hgetallBuffer(this.keys.task(taskId));
    const status = h['status']?.toString();
    if (!h['id'] || (status !== 'running' && status !== 'compensating')) return undefined;
    const plan = JSON.parse(h['plan']?.toString('utf8') ?? '[]') as PlanStep[];
    const t = inFlightHead(h, status);
    const add = (d: Dispatch): void => {
      t.dispatch.push(d);
      for (const n of d.needs) {
        const out = h[`o:${n}`];
        if (out) t.outputs.set(n, out);
      }
    };
    for (const p of plan) {
      const rec = JSON.parse(h[`s:${p.n}`]?.toString('utf8') ?? '{}') as Partial<StepRecord> & { fe?: FanOutRecord };
      if (p.fe) {
        // A fan-out step's requests are its elements' (those started and not ended, and those compensating).
        const fe = rec.fe;
        if (!fe) continue;
        for (const i of elementsInFlight(fe)) {
          const erec = JSON.parse(h[`s:${p.n}#${i}`]?.toString('utf8') ?? '{}') as Partial<StepRecord>;
          // An element waiting for a limit: its queue item (decision 0020 §2.7).
          for (const kind of ['run', 'compensate'] as const) {
            const q = queuedOf(taskId, { n: `${p.n}#${i}` }, erec as QueuedRecord, kind);
            if (!q) continue;
            t.limiter ??= new Map();
            const ops = t.limiter.get(q.agent) ?? { queue: [], release: [], dequeue: [] };
            ops.queue.push(q.item);
            t.limiter.set(q.agent, ops);
          }
          const d = elementDispatchInFlight(p, erec, i, fe.n);
          if (!d) continue;
          add(d);
          const value = elementValue(h[`fl:${p.n}`], h[`fo:${p.n}`], i);
          if (value) t.outputs.set(elementValueKey(p.n, i), value);
        }
        continue;
      }
      const d = dispatchInFlight(p, rec);
      if (d) add(d);
      // A phase waiting for a limit: its queue item, for the limiter (decision 0020 §2.3).
      for (const kind of ['run', 'compensate'] as const) {
        const q = queuedOf(taskId, p, rec as QueuedRecord, kind);
        if (!q) continue;
        t.limiter ??= new Map();
        const ops = t.limiter.get(q.agent) ?? { queue: [], release: [], dequeue: [] };
        ops.queue.push(q.item);
        t.limiter.set(q.agent, ops);
      }
      const ci = h[`ci:${p.n}`];
      if (d?.child === 'start' && ci) t.outputs.set(childInputKey(p.n), ci);
    }
    const createdAt = Number(h['createdAt']?.toString('utf8'));
    if (Number.isFinite(createdAt)) t.createdAt = createdAt;
    return t;
  }

  /**
   * One request in flight — the step's `kind` at `attempt`, if that is still what the task runs — with
   * the input and the outputs it needs, read field by field (never the whole record): what a retry
   * command sends (the supervisor's transition already started the attempt). Undefined when the task
   * finished or the attempt was superseded.
   */
  async stepInFlight(taskId: string, step: string, kind: 'run' | 'compensate', attempt: number, item?: number): Promise<Transition | undefined> {
    if (item !== undefined) return this.elementInFlight(taskId, step, kind, attempt, item);
    const key = this.keys.task(taskId);
    const read = await this.readRunning(key, [`s:${step}`, `ci:${step}`, 'createdAt']);
    if (!read) return undefined;
    const { h, t } = read;
    const p = (await this.pinnedPlan(t.workflow, t.version))?.find((s) => s.n === step);
    if (!p) return undefined;
    const d = dispatchInFlight(p, JSON.parse(h[`s:${step}`]?.toString('utf8') ?? '{}') as Partial<StepRecord>);
    if (!d || d.kind !== kind || d.attempt !== attempt) return undefined;
    t.dispatch.push(d);
    if (d.child) {
      // A child step's operation (decision 0019 §5.2): a start carries the child's input when it is a slice.
      const ci = h[`ci:${step}`];
      if (d.child === 'start' && ci) t.outputs.set(childInputKey(step), ci);
      const createdAt = Number(h['createdAt']?.toString('utf8'));
      if (Number.isFinite(createdAt)) t.createdAt = createdAt;
      return t;
    }
    await this.readNeeds(key, d.needs, t);
    return t;
  }

  /**
   * The head of a task that still runs (or is being undone) and the named fields of its record, read in
   * one HMGET (never the whole record); undefined when the task is gone or finished.
   */
  private async readRunning(key: string, extra: readonly string[]): Promise<{ h: TaskHash; t: Transition } | undefined> {
    const fields = ['id', 'status', 'workflow', 'version', 'client', 'replyTo', 'lockEpoch', 'input', ...extra];
    const values = await this.redis.hmgetBuffer(key, ...fields);
    const h: TaskHash = {};
    fields.forEach((f, i) => {
      const v = values[i];
      if (v) h[f] = v;
    });
    const status = h['status']?.toString();
    // A failed task has nothing in flight but a child step's cancel (decision 0019 §2.7), which dispatchInFlight finds.
    if (!h['id'] || (status !== 'running' && status !== 'compensating' && status !== 'failed')) return undefined;
    return { h, t: inFlightHead(h, status) };
  }

  /** The outputs a request needs (`o:<step>`), into the transition's outputs. */
  private async readNeeds(key: string, needs: readonly string[], t: Transition): Promise<void> {
    if (needs.length === 0) return;
    const outs = await this.redis.hmgetBuffer(key, ...needs.map((n) => `o:${n}`));
    needs.forEach((n, i) => {
      const out = outs[i];
      if (out) t.outputs.set(n, out);
    });
  }

  /**
   * stepInFlight for fan-out element `item` (decision 0019 §4): its record, its value (a slice of the
   * step's snapshotted list), and the outputs its request carries, read field by field.
   */
  private async elementInFlight(taskId: string, step: string, kind: 'run' | 'compensate', attempt: number, item: number): Promise<Transition | undefined> {
    const key = this.keys.task(taskId);
    const name = `${step}#${item}`;
    const read = await this.readRunning(key, [`s:${step}`, `s:${name}`, `fl:${step}`, `fo:${step}`]);
    if (!read) return undefined;
    const { h, t } = read;
    const p = (await this.pinnedPlan(t.workflow, t.version))?.find((s) => s.n === step);
    const fe = (JSON.parse(h[`s:${step}`]?.toString('utf8') ?? '{}') as { fe?: FanOutRecord }).fe;
    if (!p?.fe || !fe) return undefined;
    const d = elementDispatchInFlight(p, JSON.parse(h[`s:${name}`]?.toString('utf8') ?? '{}') as Partial<StepRecord>, item, fe.n);
    if (!d || d.kind !== kind || d.attempt !== attempt) return undefined;
    t.dispatch.push(d);
    const value = elementValue(h[`fl:${step}`], h[`fo:${step}`], item);
    if (value) t.outputs.set(elementValueKey(step, item), value);
    await this.readNeeds(key, d.needs, t);
    return t;
  }

  /**
   * Starts a phase that waited for a limit with its grant (startQueued.lua, decision 0020 Q4): only if it
   * still holds the ticket. `late`: too close to the granted complete-by (release and requeue); `stale`
   * with `release`: whether the caller must release the ticket's permit; `gone`: the task was removed.
   */
  async startQueued(a: { lease: LeaseClaim; taskId: string; phase: string; kind: 'run' | 'compensate'; ticket: string; completeBy: number; now: number; schedulerId: string }): Promise<StartQueuedOutcome> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(this.redis, 'startQueued', [k.task(a.taskId), b.deadlines, a.lease.key], [a.taskId, a.phase, a.kind, a.ticket, a.completeBy, a.now, a.schedulerId, a.lease.token, a.lease.ms])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.Ok) return { started: true, transition: parseTransition(reply) };
    if (code === ScriptCode.Late) return { started: false, why: 'late' };
    if (code === ScriptCode.UnknownTask) return { started: false, why: 'gone' };
    if (code === ScriptCode.Stale) {
      const body = parseBody(reply[1]) as { reason?: string; release?: boolean };
      return { started: false, why: 'stale', release: body.release !== false, reason: body.reason ?? 'stale' };
    }
    throw scriptError(code, `start ${a.taskId}/${a.phase} (${a.kind}) with ticket ${a.ticket}`);
  }

  /**
   * The queue item of a phase if it still waits with `ticket` (a queue_step command; decision 0020 §2.5),
   * read field by field; undefined otherwise.
   */
  async queuedPhase(taskId: string, phase: string, kind: 'run' | 'compensate', ticket: string): Promise<{ agent: string; item: QueuedPhase } | undefined> {
    const key = this.keys.task(taskId);
    const [status, raw] = await this.redis.hmget(key, 'status', `s:${phase}`);
    if (!raw || (status !== 'running' && status !== 'compensating')) return undefined;
    const q = queuedOf(taskId, { n: phase }, JSON.parse(raw) as QueuedRecord, kind);
    return q && q.item.ticket === ticket ? q : undefined;
  }

  /** An operator's retry of a failed (or parked) step, optionally with a corrected task input. */
  async retryStep(a: { lease: LeaseClaim; taskId: string; step?: string; input?: Uint8Array; now: number; schedulerId: string; op?: BulkFence }): Promise<Transition & { step: string }> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(
      this.redis,
      'retryStep',
      [k.task(a.taskId), b.deadlines, b.finished, b.alerts, a.lease.key, b.compact, b.alertOutbox, b.search],
      [a.taskId, a.step ?? '', a.input ?? '', a.now, a.schedulerId, a.lease.token, a.lease.ms, a.op?.id ?? '', a.op?.expectStatus ?? '', a.op?.createdBefore ?? '', await this.limited(a.now)],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok) throw scriptError(code, `retry ${a.taskId}${a.step ? `/${a.step}` : ''}`, parseBody(reply[1]).reason);
    return { ...parseTransition(reply), step: (parseBody(reply[1]) as { step?: string }).step ?? a.step ?? '' };
  }

  /**
   * A signal for a task (decision 0019 §3.3): delivered to the step waiting for it, buffered until one
   * waits, or a duplicate of one accepted before; `client` — the client a scoped subject names — may
   * signal only its own tasks (another's answers UNKNOWN_TASK, as a missing one). Refusals throw with
   * the reason (INVALID_STATE; UNAVAILABLE when the task's buffer is full).
   */
  async signalTask(a: { lease: LeaseClaim; taskId: string; name: string; signalId: string; data?: Uint8Array; client?: string; now: number; schedulerId: string }): Promise<{ outcome: 'delivered' | 'buffered' | 'duplicate'; step?: string; transition: Transition }> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(
      this.redis,
      'signalTask',
      [k.task(a.taskId), b.deadlines, b.finished, a.lease.key, b.compact, b.alerts, b.alertOutbox, b.search],
      [a.taskId, a.name, a.signalId, a.data ?? '', a.now, a.schedulerId, a.lease.token, a.lease.ms, a.client ?? '', await this.limited(a.now)],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok) throw scriptError(code, `signal ${a.name} for task ${a.taskId}`, parseBody(reply[1]).reason);
    const body = parseBody(reply[1]) as { outcome?: 'delivered' | 'buffered' | 'duplicate'; step?: string };
    return { outcome: body.outcome ?? 'duplicate', ...(body.step ? { step: body.step } : {}), transition: parseTransition(reply) };
  }

  /** An operator cancels a running task: it stops and its completed steps are compensated. */
  async cancelTask(a: { lease: LeaseClaim; taskId: string; reason: string; now: number; schedulerId: string; op?: BulkFence }): Promise<Transition> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(this.redis, 'cancelTask', [k.task(a.taskId), b.deadlines, b.finished, a.lease.key, b.compact, b.search], [a.taskId, a.reason, a.now, a.schedulerId, a.lease.token, a.lease.ms, a.op?.id ?? '', a.op?.expectStatus ?? '', a.op?.createdBefore ?? '', await this.limited(a.now)])) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok) throw scriptError(code, `cancel ${a.taskId}`, parseBody(reply[1]).reason);
    return parseTransition(reply);
  }

  /**
   * A child step's `start` (decision 0019 §5.2, startChild.lua): the child task created under its own
   * lease and linked to the step; idempotent (an existing child → `exists`, its notice written again when
   * it ended). Without a plan, a cancelled stub whose notice fails the step with `reason`. Throws
   * INVALID_STATE when the id is another task's, LEASE_BUSY when another scheduler holds the child.
   */
  async startChild(a: StartChildArgs): Promise<ChildOutcome> {
    const k = this.keys;
    const b = k.forTask(a.childId);
    const l = a.link;
    const plan = a.plan ? (a.planJson ?? JSON.stringify(a.plan)) : '';
    const reply = (await runScript(
      this.redis,
      'startChild',
      [k.task(a.childId), b.tasks, b.deadlines, b.finished, a.lease.key, b.compact, b.alerts, b.alertOutbox, b.search],
      [a.childId, a.workflow, a.version, a.input, plan, a.now, a.schedulerId, a.onFailure ?? 'error', a.lease.token, a.lease.ms, a.deadlineMs ?? '', a.client, l.parentId, l.parentStep, l.attempt, l.holdUntil, a.reason ?? ''],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.Exists) return { applied: false, action: 'exists', status: parseBody(reply[1]).status ?? 'running' };
    if (code !== ScriptCode.Ok) throw scriptError(code, `start child task ${a.childId}`, parseBody(reply[1]).reason);
    await this.replicated(k.task(a.childId), `start child task ${a.childId}`);
    return { applied: true, action: a.plan ? 'started' : 'stub', transition: parseTransition(reply) };
  }

  /**
   * The parent's side of a refused start (childRefused.lua, decision 0019 §5.2): the child's id is taken by
   * a task that is not the step's child, so the step fails for good now and the task follows its
   * onFailure. Not applied (stale) when the step no longer waits for that start.
   */
  async childRefused(a: { lease: LeaseClaim; taskId: string; step: string; attempt: number; childId: string; reason: string; now: number; schedulerId: string }): Promise<{ applied: true; action: string; transition: Transition } | { applied: false; reason: string }> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(
      this.redis,
      'childRefused',
      [k.task(a.taskId), b.deadlines, b.finished, a.lease.key, b.compact, b.alerts, b.alertOutbox, b.search],
      [a.taskId, a.step, a.attempt, a.childId, a.reason, a.now, a.schedulerId, a.lease.token, a.lease.ms],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.Stale) return { applied: false, reason: parseBody(reply[1]).reason ?? 'stale' };
    if (code !== ScriptCode.Ok) throw scriptError(code, `refused child of ${a.taskId}/${a.step}`, parseBody(reply[1]).reason);
    return { applied: true, action: (parseBody(reply[1]) as { action?: string }).action ?? 'error', transition: parseTransition(reply) };
  }

  /**
   * A child step's `cancel` or `undo` (cancelChild.lua, undoChild.lua): the child's own undo begins (or
   * a tombstone stands for a child never started, or its notice is written again when it ended).
   */
  async stopChild(op: Exclude<ChildOp, 'start'>, a: { lease: LeaseClaim; childId: string; link: ChildLink; workflow: string; client: string; reason: string; now: number; schedulerId: string }): Promise<ChildOutcome> {
    const k = this.keys;
    const b = k.forTask(a.childId);
    const l = a.link;
    const reply = (await runScript(
      this.redis,
      op === 'cancel' ? 'cancelChild' : 'undoChild',
      [k.task(a.childId), b.tasks, b.deadlines, b.finished, a.lease.key, b.compact, b.search],
      [a.childId, l.parentId, l.parentStep, l.kind, l.attempt, a.now, a.schedulerId, a.lease.token, a.lease.ms, a.reason, a.workflow, a.client, l.holdUntil],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok) throw scriptError(code, `${op} child task ${a.childId}`, parseBody(reply[1]).reason);
    return { applied: true, action: (parseBody(reply[1]) as { action?: string }).action ?? 'ended', transition: parseTransition(reply) };
  }

  /**
   * Delivers a finished child's notice to its parent (decision 0019 §5.3), fenced by `epoch` at every
   * step: takeParentNotice (the member moved `retryMs` ahead), childEnded on the parent, dropParentNotice.
   * Undefined when there was nothing to deliver. A crash anywhere repeats the delivery, which changes
   * nothing the second time. Throws TriadError STALE for an older epoch.
   */
  async deliverNotice(childId: string, now: number, epoch: number, retryMs = 5_000, between?: (stage: 'taken' | 'ended') => Promise<void>): Promise<NoticeDelivery | undefined> {
    const k = this.keys;
    const cb = k.forTask(childId);
    const took = (await runScript(this.redis, 'takeParentNotice', [k.task(childId), cb.deadlines, cb.epoch], [childId, now, epoch, retryMs])) as unknown[];
    if (Number(took[0]) !== ScriptCode.Ok) throw scriptError(Number(took[0]), `take the notice of child task ${childId} at epoch ${epoch}`);
    const n = parseBody(took[1]) as { action?: string; parent?: string; step?: string; kind?: string; attempt?: number; status?: string; error?: string; workflow?: string; score?: number };
    if (n.action !== 'deliver' || !n.parent || !n.step) return undefined;
    const out = Buffer.isBuffer(took[2]) ? took[2] : Buffer.alloc(0);
    await between?.('taken');
    const pb = k.forTask(n.parent);
    const ended = (await runScript(
      this.redis,
      'childEnded',
      [k.task(n.parent), pb.deadlines, pb.epoch, pb.finished, pb.compact, pb.alerts, pb.alertOutbox, pb.search],
      [n.parent, n.step, n.kind ?? 'run', n.attempt ?? 0, childId, n.status ?? '', n.error ?? '', out, n.workflow ?? '', now, epoch],
    )) as unknown[];
    const code = Number(ended[0]);
    if (code !== ScriptCode.Ok && code !== ScriptCode.UnknownTask) throw scriptError(code, `deliver the notice of child task ${childId} to ${n.parent} at epoch ${epoch}`);
    const expiry: Expiry = code === ScriptCode.Ok ? parseExpiry(ended[1]) : { action: 'noop', kind: 'run', client: DEFAULT_CLIENT_ID, events: [], dispatch: [] };
    await between?.('ended');
    const dropped = (await runScript(this.redis, 'dropParentNotice', [k.task(childId), cb.deadlines, cb.epoch], [childId, n.score ?? 0, `${n.kind ?? 'run'}:${n.attempt ?? 0}:${n.status ?? ''}`, epoch])) as unknown[];
    if (Number(dropped[0]) !== ScriptCode.Ok) throw scriptError(Number(dropped[0]), `drop the notice of child task ${childId} at epoch ${epoch}`);
    return { parentId: n.parent, step: n.step, childId, childStatus: n.status ?? '', expiry };
  }

  /**
   * Retention: removes up to `limit` tasks that finished before `cutoff`, oldest first. Fenced by the
   * supervisor epoch: throws TriadError STALE when `epoch` is older than a bucket's fence.
   */
  async purgeFinished(cutoff: number, limit: number, epoch: number): Promise<number> {
    return (await this.purgeFinishedBuckets(cutoff, limit, epoch)).removed;
  }

  /**
   * purgeFinished, and whether more may be due (`full`). Each bucket's finished index is read from its
   * start (decision 0015), the oldest `limit` due chosen, and the purge script runs only in the buckets
   * that hold them, each with its count: O(buckets + due), one slot per script.
   */
  async purgeFinishedBuckets(cutoff: number, limit: number, epoch: number): Promise<{ removed: number; full: boolean; objects: PurgedObjects[] }> {
    const { counts, full } = await this.dueByBucket('finished', cutoff, limit);
    const replies = await Promise.all(
      counts.map(async ([b, n]) => (await runScript(this.redis, 'purgeFinished', [b.finished, b.tasks, b.epoch, b.compact, b.search], [b.taskPrefix, cutoff, n, epoch])) as unknown[]),
    );
    let removed = 0;
    const objects: PurgedObjects[] = [];
    for (const reply of replies) {
      const code = Number(reply[0]);
      if (code !== ScriptCode.Ok) throw scriptError(code, 'purge finished tasks');
      removed += Number(reply[1]);
      const owned = typeof reply[2] === 'string' ? (JSON.parse(reply[2]) as unknown) : reply[2] instanceof Buffer ? (JSON.parse(reply[2].toString()) as unknown) : [];
      if (Array.isArray(owned)) {
        for (const o of owned as unknown[]) {
          if (Array.isArray(o) && typeof o[0] === 'string' && Array.isArray(o[1])) objects.push({ client: o[0], names: (o[1] as unknown[]).filter((n): n is string => typeof n === 'string') });
        }
      }
    }
    return { removed, full, objects };
  }

  /**
   * The object GC's attach (attachObjects.lua): makes `name`, found in `client`'s bucket, task `taskId`'s
   * own. 'none': no such task; 'other': another client's task. Fenced by the supervisor epoch.
   */
  async attachObject(taskId: string, client: string, name: string, epoch: number): Promise<'none' | 'other' | 'owned' | 'attached'> {
    const b = this.keys.forTask(taskId);
    const reply = (await runScript(this.redis, 'attachObjects', [this.keys.task(taskId), b.epoch], [client, name, epoch])) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok) throw scriptError(code, `attach object ${name} to task ${taskId}`);
    return String(reply[1]) as 'none' | 'other' | 'owned' | 'attached';
  }

  /** The object GC's checkpoint of a bucket: the last stream sequence walked (0: none). */
  async objectGcCheckpoint(bucket: string): Promise<number> {
    return Number((await this.redis.hget(this.keys.objectGc, bucket)) ?? 0);
  }

  async setObjectGcCheckpoint(bucket: string, seq: number): Promise<void> {
    await this.redis.hset(this.keys.objectGc, bucket, String(seq));
  }

  /**
   * Retention's compaction stage: rewrites up to `limit` tasks that finished (completed, compensated or
   * cancelled) at or before `cutoff` into their compact record (compactFinished.lua), oldest first.
   * O(buckets + due). Fenced by the supervisor epoch: throws TriadError STALE when `epoch` is older.
   */
  async compactFinished(cutoff: number, limit: number, epoch: number): Promise<{ compacted: number; skipped: number }> {
    const { compacted, skipped } = await this.compactFinishedBuckets(cutoff, limit, epoch);
    return { compacted, skipped };
  }

  /** compactFinished, and whether more may be due (`full`); chosen per bucket as purgeFinishedBuckets does. */
  async compactFinishedBuckets(cutoff: number, limit: number, epoch: number): Promise<{ compacted: number; skipped: number; full: boolean }> {
    const { counts, full } = await this.dueByBucket('compact', cutoff, limit);
    const replies = await Promise.all(
      counts.map(async ([b, n]) => (await runScript(this.redis, 'compactFinished', [b.compact, b.epoch], [b.taskPrefix, cutoff, n, epoch])) as unknown[]),
    );
    let compacted = 0;
    let skipped = 0;
    for (const reply of replies) {
      const code = Number(reply[0]);
      if (code !== ScriptCode.Ok) throw scriptError(code, `compact finished tasks at epoch ${epoch}`);
      compacted += Number(reply[1]);
      skipped += Number(reply[2]);
    }
    return { compacted, skipped, full };
  }

  /**
   * The oldest `limit` entries at or before `cutoff` of an index over every bucket, as a count per bucket
   * (each bucket's own oldest ones); `full` when `limit` were found (more may be due).
   */
  private async dueByBucket(which: 'finished' | 'compact', cutoff: number, limit: number): Promise<{ counts: [BucketKeys, number][]; full: boolean }> {
    const perBucketDue = await Promise.all(this.keys.buckets.map((b) => this.redis.zrangebyscore(b[which], '-inf', cutoff, 'WITHSCORES', 'LIMIT', 0, limit)));
    const due: { b: BucketKeys; at: number; member: string }[] = [];
    perBucketDue.forEach((flat, i) => {
      const b = this.keys.buckets[i] as BucketKeys;
      for (let j = 0; j + 1 < flat.length; j += 2) due.push({ b, member: flat[j] as string, at: Number(flat[j + 1]) });
    });
    // Oldest first; ties as ZRANGEBYSCORE orders them (by member), so each bucket's count covers the same entries.
    due.sort((x, y) => x.at - y.at || (x.member < y.member ? -1 : x.member > y.member ? 1 : 0));
    const counts = new Map<BucketKeys, number>();
    for (const d of due.slice(0, limit)) counts.set(d.b, (counts.get(d.b) ?? 0) + 1);
    return { counts: [...counts], full: due.length >= limit };
  }

  /**
   * A new leader raises every bucket's fence to its epoch before it acts (decision 0015). Throws TriadError
   * STALE when a bucket was already fenced by a newer epoch.
   */
  async fenceBuckets(epoch: number): Promise<void> {
    await fenceBuckets(this.redis, this.keys, epoch);
  }

  /**
   * Alerts recorded by transitions and not yet published (oldest first, at most `limit`), each with the
   * exact outbox entry to remove once JetStream stored it (decision 0009), and its bucket.
   */
  async pendingAlerts(limit: number): Promise<PendingAlert[]> {
    const perBucketEntries = await Promise.all(this.keys.buckets.map((b) => this.redis.zrange(b.alertOutbox, 0, limit - 1, 'WITHSCORES')));
    const all: { bucket: number; entry: string; at: number }[] = [];
    perBucketEntries.forEach((flat, bucket) => {
      for (let i = 0; i + 1 < flat.length; i += 2) all.push({ bucket, entry: flat[i] as string, at: Number(flat[i + 1]) });
    });
    all.sort((x, y) => x.at - y.at);
    return all.slice(0, limit).map(({ bucket, entry }) => ({ bucket, entry, alert: JSON.parse(entry) as Alert }));
  }

  /** Removes published alerts from their buckets' outboxes. */
  async alertsPublished(entries: readonly Pick<PendingAlert, 'bucket' | 'entry'>[]): Promise<void> {
    const byBucket = new Map<number, string[]>();
    for (const e of entries) byBucket.set(e.bucket, [...(byBucket.get(e.bucket) ?? []), e.entry]);
    await Promise.all(
      [...byBucket].map(async ([bucket, list]) => {
        const b = this.keys.buckets[bucket];
        if (b) await this.redis.zrem(b.alertOutbox, ...list);
      }),
    );
  }

  /** Open operator alerts (closed by an operator's retry of their task), from every bucket. */
  async openAlerts(): Promise<Alert[]> {
    const all = (await Promise.all(this.keys.buckets.map((b) => this.redis.hvals(b.alerts)))).flat();
    return all.map((v) => JSON.parse(v) as Alert).sort((a, b) => b.raisedAt - a.raisedAt);
  }

  /** Records a supervisor's last report (its health), read by supervisorStatus(). */
  async reportSupervisorStatus(supervisorId: string, report: Record<string, unknown>): Promise<void> {
    await this.redis.hset(this.keys.supervisorStatus, supervisorId, JSON.stringify(report));
  }

  /** The supervisors' last reports and the current leader. */
  async supervisorStatus(): Promise<{ leader?: { id: string; epoch: number }; supervisors: Record<string, unknown>[] }> {
    const [leader, status] = await Promise.all([this.redis.get(this.keys.supervisorLeader), this.redis.hgetall(this.keys.supervisorStatus)]);
    const supervisors = Object.values(status).map((v) => JSON.parse(v) as Record<string, unknown>);
    if (!leader) return { supervisors };
    const sep = leader.lastIndexOf('|');
    return { leader: { id: leader.slice(0, sep), epoch: Number(leader.slice(sep + 1)) }, supervisors };
  }

  /**
   * The supervisor's transition for an expired step (retry, park, or error by the step's ladder).
   * Throws TriadError STALE when `epoch` is older than the current leader epoch.
   */
  async expireStep(taskId: string, step: string, now: number, epoch: number): Promise<Expiry> {
    const k = this.keys;
    const b = k.forTask(taskId);
    const reply = (await runScript(this.redis, 'expireStep', [k.task(taskId), b.deadlines, b.epoch, b.finished, b.compact, b.alerts, b.alertOutbox, b.search], [taskId, step, now, epoch, await this.limited(now)])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.UnknownTask) return { action: 'noop', kind: 'run', client: DEFAULT_CLIENT_ID, events: [], dispatch: [] };
    if (code !== ScriptCode.Ok) throw scriptError(code, `expire ${taskId}/${step} at epoch ${epoch}`);
    return parseExpiry(reply[1]);
  }

  /**
   * The supervisor's transition for a task whose own deadline passed (expireTask.lua): the undo begins,
   * or the task fails with a task_deadline alert. Throws TriadError STALE for an older epoch.
   */
  /**
   * Starts a task its client's ending task admitted (admitTask.lua, decision 0024), under its lease: its
   * ready steps, as createTask would have started them. `started: false` when it was not waiting to be
   * started (already started by another caller, ended, or removed).
   */
  async admitTask(a: { lease: LeaseClaim; taskId: string; now: number; schedulerId: string }): Promise<{ started: true; transition: Transition } | { started: false; reason: string }> {
    const k = this.keys;
    const b = k.forTask(a.taskId);
    const reply = (await runScript(this.redis, 'admitTask', [k.task(a.taskId), b.deadlines, b.finished, a.lease.key, b.compact, b.alerts, b.alertOutbox, b.search], [a.taskId, a.now, a.schedulerId, a.lease.token, a.lease.ms, await this.limited(a.now)])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.Ok) return { started: true, transition: parseTransition(reply) };
    if (code === ScriptCode.InvalidState) return { started: false, reason: parseBody(reply[1]).reason ?? 'not waiting to be started' };
    if (code === ScriptCode.UnknownTask) return { started: false, reason: 'the task was removed' };
    throw scriptError(code, `admit ${a.taskId}`);
  }

  /**
   * The leader supervisor's start of an admitted task whose scheduler did not start it in time (its
   * `<taskId>|#admit` member fell due; decision 0024), fenced by the epoch: action `admit` with the steps
   * it started (sent as retry_step commands), or `noop`.
   */
  async admitAsLeader(taskId: string, now: number, epoch: number): Promise<Expiry> {
    const k = this.keys;
    const b = k.forTask(taskId);
    const reply = (await runScript(this.redis, 'admitTask', [k.task(taskId), b.deadlines, b.finished, b.epoch, b.compact, b.alerts, b.alertOutbox, b.search], [taskId, now, '', epoch, 0, await this.limited(now)])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.UnknownTask || code === ScriptCode.InvalidState) return { action: 'noop', kind: 'run', client: DEFAULT_CLIENT_ID, events: [], dispatch: [] };
    if (code !== ScriptCode.Ok) throw scriptError(code, `admit ${taskId} at epoch ${epoch}`);
    return parseExpiry(reply[1]);
  }

  /**
   * A client's admission in each bucket (decision 0024): how many of its tasks are active and how many wait,
   * summed over the buckets (2 × BUCKETS calls: for operators and tests, not hot paths).
   */
  async admission(client: string): Promise<{ active: number; waiting: number }> {
    const counts = await Promise.all(
      this.keys.buckets.map(async (b) => {
        const ak = admissionKeys(b, client);
        return [await this.redis.scard(ak.active), await this.redis.zcard(ak.waiting)] as const;
      }),
    );
    return { active: counts.reduce((n, c) => n + c[0], 0), waiting: counts.reduce((n, c) => n + c[1], 0) };
  }

  async expireTask(taskId: string, now: number, epoch: number): Promise<Expiry> {
    const k = this.keys;
    const b = k.forTask(taskId);
    const reply = (await runScript(this.redis, 'expireTask', [k.task(taskId), b.deadlines, b.epoch, b.finished, b.compact, b.alerts, b.alertOutbox, b.search], [taskId, now, epoch, await this.limited(now)])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.UnknownTask) return { action: 'noop', kind: 'run', client: DEFAULT_CLIENT_ID, events: [], dispatch: [] };
    if (code !== ScriptCode.Ok) throw scriptError(code, `expire the deadline of ${taskId} at epoch ${epoch}`);
    return parseExpiry(reply[1]);
  }

  /**
   * Steps whose complete-by has passed, oldest first, at most `limit`: each bucket's deadline index read
   * from its start, merged — O(buckets · log n + expired), whatever the number of finished tasks.
   */
  async expiredSteps(now: number, limit: number): Promise<{ taskId: string; step: string; completeBy: number }[]> {
    const perBucketRaw = await Promise.all(this.keys.buckets.map((b) => this.redis.zrangebyscore(b.deadlines, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)));
    const out: { taskId: string; step: string; completeBy: number }[] = [];
    for (const raw of perBucketRaw) {
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const m = parseDeadlineMember(raw[i] as string);
        if (m) out.push({ ...m, completeBy: Number(raw[i + 1]) });
      }
    }
    out.sort((x, y) => x.completeBy - y.completeBy);
    return out.length > limit ? out.slice(0, limit) : out;
  }

  /** The earliest complete-by in the deadline indexes (epoch ms), if any step is waiting on one. */
  async nextDeadline(): Promise<number | undefined> {
    const firsts = await Promise.all(this.keys.buckets.map((b) => this.redis.zrange(b.deadlines, 0, 0, 'WITHSCORES')));
    let next: number | undefined;
    for (const first of firsts) {
      if (first.length < 2) continue;
      const at = Number(first[1]);
      if (next === undefined || at < next) next = at;
    }
    return next;
  }

  async countExpired(now: number): Promise<number> {
    const counts = await Promise.all(this.keys.buckets.map((b) => this.redis.zcount(b.deadlines, '-inf', now)));
    return counts.reduce((a, b) => a + b, 0);
  }
}

/** A transition for the requests of a task in flight, without them yet (inFlight, stepInFlight). */
function inFlightHead(h: TaskHash, status: TaskStatus): Transition {
  const t: Transition = {
    workflow: h['workflow']?.toString('utf8') ?? '',
    version: Number(h['version']?.toString('utf8') ?? 0),
    client: h['client']?.toString('utf8') ?? DEFAULT_CLIENT_ID,
    lockEpoch: Number(h['lockEpoch']?.toString('utf8') ?? 0),
    status,
    events: [],
    dispatch: [],
    outputs: new Map(),
  };
  const replyTo = h['replyTo']?.toString('utf8');
  if (replyTo) t.replyTo = replyTo;
  if (h['input']) t.input = h['input'];
  return t;
}

/**
 * The request a step has in flight, if any: its compensation (which gets the step's own output only when
 * the run is known to have completed), or its run. A phase that reported its failure is not in flight
 * (the supervisor decides its next attempt), nor is a parked one.
 */
function dispatchInFlight(p: PlanStep, rec: Partial<StepRecord>): Dispatch | undefined {
  if (p.k === 'c') return childDispatchInFlight(p, rec);
  // A compensation waiting for a dispatch limit (decision 0020) has no attempt in flight.
  if (rec.status === 'compensating' && p.c && rec.comp && !rec.comp.parked && !rec.comp.reported && !(rec.comp as { queued?: boolean }).queued && rec.comp.completeBy !== undefined) {
    const applied = rec.effect === 'applied';
    return { step: p.n, agent: p.c.a, kind: 'compensate', attempt: rec.comp.attempt, completeBy: rec.comp.completeBy, needs: applied ? [p.n] : [], effect: applied ? 'applied' : 'unknown' };
  }
  if (rec.status !== 'processing' || rec.reported || rec.attempt === undefined || rec.completeBy === undefined) return undefined;
  return { step: p.n, agent: p.a ?? '', kind: 'run', attempt: rec.attempt, completeBy: rec.completeBy, needs: Array.isArray(p.nd) ? p.nd : [] };
}

/** What a phase record keeps while it waits for a limit (decision 0020 §2.1; written by the Lua transitions). */
interface QueueRecord {
  t: string;
  a: string;
  k: string;
  p: number;
  f: number;
  /** The phase's budget (ms): its permit's length. */
  b: number;
}
type QueuedRecord = { status?: string; q?: QueueRecord; comp?: { queued?: boolean; q?: QueueRecord } };

/** A phase's queue item while it waits for a limit (run: status queued; compensation: comp.queued). */
function queuedOf(taskId: string, p: Pick<PlanStep, 'n'>, rec: QueuedRecord, kind: 'run' | 'compensate'): { agent: string; item: QueuedPhase } | undefined {
  const q = kind === 'run' ? (rec.status === 'queued' ? rec.q : undefined) : rec.status === 'compensating' && rec.comp?.queued ? rec.comp.q : undefined;
  if (!q) return undefined;
  return { agent: q.a, item: { ticket: q.t, taskId, phase: p.n, kind, key: q.k, priority: q.p, firstAt: q.f, budgetMs: q.b } };
}

/**
 * A child step's operation still to be applied, if any (the check re-sends it until the child's notice
 * arrives): its start or cancel (run phase: waiting, or abandoned when its task failed), its undo
 * (compensating).
 */
function childDispatchInFlight(p: PlanStep, rec: Partial<StepRecord>): Dispatch | undefined {
  const c = rec.child;
  if (!c || c.ended) return undefined;
  const base = { step: p.n, agent: '', completeBy: 0, needs: [], child: c.op, childId: c.id, sent: c.sent ?? 0 };
  if (rec.status === 'compensating' && c.op === 'undo' && rec.comp) return { ...base, kind: 'compensate', attempt: rec.comp.attempt };
  if ((rec.status === 'waiting' || (rec.status === 'abandoned' && c.op === 'cancel')) && rec.attempt !== undefined) return { ...base, kind: 'run', attempt: rec.attempt };
  return undefined;
}

/** What a fan-out step's record keeps of its elements (decision 0019 §4; written by the Lua transitions). */
interface FanOutRecord {
  n: number;
  live?: number[] | Record<string, never>;
  undo?: number[] | Record<string, never>;
  undoNext?: number;
  compRunning?: number;
}

/** The elements that may have a request in flight: those started and not ended, and the compensations begun. */
function elementsInFlight(fe: FanOutRecord): number[] {
  const live = Array.isArray(fe.live) ? fe.live : [];
  const undo = Array.isArray(fe.undo) ? fe.undo.slice(0, Math.max(0, (fe.undoNext ?? 1) - 1)) : [];
  return [...new Set([...live, ...undo])];
}

/** Element `i`'s request in flight, if any: as dispatchInFlight, for the element's record. */
function elementDispatchInFlight(p: PlanStep, rec: Partial<StepRecord>, i: number, count: number): Dispatch | undefined {
  const name = `${p.n}#${i}`;
  const d = dispatchInFlight({ ...p, n: name }, rec);
  if (!d) return undefined;
  d.step = p.n;
  d.item = i;
  d.count = count;
  if (d.kind === 'run') d.needs = Array.isArray(p.nd) ? p.nd : [];
  return d;
}

/** Element `i`'s bytes: its slice of the list a fan-out step snapshotted (`fl:`), by its offsets (`fo:`, u32 big-endian). */
function elementValue(list: Buffer | undefined, offsets: Buffer | undefined, i: number): Buffer | undefined {
  if (!list || !offsets || offsets.length < 4 * (i + 2)) return undefined;
  return list.subarray(offsets.readUInt32BE(4 * i), offsets.readUInt32BE(4 * i + 4));
}

/** An alert waiting in a bucket's outbox. */
export interface PendingAlert {
  bucket: number;
  entry: string;
  alert: Alert;
}

/** How many recent tasks of the namespace a filtered list reads to find `limit` matches (docs/protocol.md §6). */
function listScanLimit(limit: number): number {
  return Math.max(limit * 20, 2000);
}

export function requireTask<T>(t: T | undefined, taskId: string): T {
  if (t === undefined) {
    throw new TriadError(ErrorCode.UnknownTask, `no task "${taskId}": check the id (finished tasks are removed after their retention time)`);
  }
  return t;
}
