/**
 * The request/reply API clients use (register and read workflows, read tasks and their events, set
 * submission limits), served by every scheduler in one queue group. Requests are validated; every
 * failure is a wire error with a reason; a request whose reply subject is not its requester's inbox is
 * neither run nor answered (decision 0022).
 */
import { performance } from 'node:perf_hooks';
import type { Msg, Subscription } from '@nats-io/nats-core';
import { PROTOCOL_MAJOR, deadLetter, protocolHeaders, unsupportedVersion, type Bus, type PayloadStore } from '@triad/bus';
import { DEFAULT_SUPERVISION, childReferences, childResolver, cronProblems, nextTick, parseEvery, taskBound, unsupportedFeatures, validateDefinition, type ScheduleTiming, type StepFeature } from '@triad/core';
import {
  ErrorCode,
  LIMITS_FEATURE,
  AgentLimitSchema,
  AgentLimitListRequestSchema,
  AgentLimitClearRequestSchema,
  GetTaskRequestSchema,
  MAX_ISSUE_CHARS,
  MAX_LISTED_ISSUES,
  GetWorkflowRequestSchema,
  ListTasksRequestSchema,
  TaskQuerySchema,
  TaskCountRequestSchema,
  TaskStuckRequestSchema,
  BulkStartRequestSchema,
  BulkApplyRequestSchema,
  BulkCheckpointRequestSchema,
  BulkEndRequestSchema,
  BulkGetRequestSchema,
  BulkListRequestSchema,
  type BulkFilter,
  type BulkOutcome,
  type TaskStatus,
  CancelTaskRequestSchema,
  MAX_SIGNAL_DATA_BYTES,
  SignalRequestSchema,
  ClearLimitRequestSchema,
  EmptyRequestSchema,
  SetLimitRequestSchema,
  TaskEventsRequestSchema,
  PayloadPutRequestSchema,
  PayloadGetRequestSchema,
  bucketClient,
  inputObjectName,
  CreateScheduleRequestSchema,
  ScheduleNameRequestSchema,
  DEFAULT_CLIENT_ID,
  ListWorkflowsRequestSchema,
  RegisterWorkflowRequestSchema,
  RetryTaskRequestSchema,
  TriadError,
  API_OPS,
  CLIENT_SCOPED_OPS,
  decode,
  encode,
  errorMessage,
  type ApiOp,
  type ApiReply,
  type Names,
  type WireError,
  type Schedule,
  type WorkflowDefinition,
} from '@triad/protocol';
import { silentLogger, type Logger } from '@triad/telemetry';
import { OpStore, ScheduleStore, canonicalTags, findStuck, isAlreadyApplied, requireTask, unknownOp, unknownSchedule, type IntakeStore, type LeaseClaim, type StoredSchedule, type TaskFilter, type TaskStore, type WorkflowStore } from '@triad/store';
import { randomBytes } from 'node:crypto';
import { triadMetrics } from '@triad/telemetry';
import type { Dispatcher } from './dispatcher.js';
import type { FlowControl } from './flow-control.js';
import { Discovery, endpointName, type EndpointStats } from './discovery.js';
import { apiReplyAllowed } from './replies.js';
import { readTaskEvents } from './task-events.js';
import type { z } from 'zod';

/**
 * The step features (decision 0019) this scheduler runs, announced in its discovery metadata
 * (`features`). A definition that uses another is refused at registration, so a half-built kind can
 * never run; each increment of 0019 §10 adds its feature here with the transitions that run it.
 */
/** How long the limits probe waits for the schedulers' discovery answers. */
const LIMITS_PROBE_WAIT_MS = 500;
/** A supervisor whose last report is older than this is taken as gone (its report stays in Redis). */
const SUPERVISOR_REPORT_FRESH_MS = 60_000;

export const SCHEDULER_FEATURES: ReadonlySet<StepFeature> = new Set<StepFeature>(['when', 'sleep', 'waitFor', 'forEach', 'child']);

/**
 * A query's filter; on a client-scoped subject (decision 0021 §1.4) always that client's tasks, and a
 * `client` field naming another is refused.
 */
function scopedFilter(q: z.output<typeof TaskCountRequestSchema>, client: string | undefined): TaskFilter {
  if (client !== undefined && q.client !== undefined && q.client !== client) {
    throw new TriadError(ErrorCode.InvalidMessage, `client "${q.client}" is not this subject's client ("${client}"): a client queries only its own tasks; leave client out`);
  }
  const owner = client ?? q.client;
  return {
    ...(q.tags && Object.keys(q.tags).length > 0 ? { tags: q.tags } : {}),
    ...(q.status ? { status: q.status } : {}),
    ...(q.workflow ? { workflow: q.workflow } : {}),
    ...(owner !== undefined ? { client: owner } : {}),
    ...(q.since !== undefined ? { since: q.since } : {}),
    ...(q.until !== undefined ? { until: q.until } : {}),
  };
}

/** Whose bucket a payload request writes: the subject's client; on a namespace-wide subject the body's (or `default`). */
function payloadOwner(client: string | undefined, named: string | undefined): string {
  if (client !== undefined && named !== undefined && named !== client) {
    throw new TriadError(ErrorCode.InvalidMessage, `client "${named}" is not this subject's client ("${client}"): a client uploads into its own bucket only; leave client out`);
  }
  return client ?? named ?? DEFAULT_CLIENT_ID;
}
/**
 * How long past a deadline `task.stuck` calls it overdue: a sweep interval and a leader change (the default
 * supervision figures, decision 0009) and a second, so a supervisor merely about to act is not listed.
 */
const STUCK_GRACE_MS = DEFAULT_SUPERVISION.sweepIntervalMs + DEFAULT_SUPERVISION.leaderLeaseMs + 1_000;

/** A bulk filter as stored in its operation's record: canonical JSON (keys and tags sorted), so a resume compares bytes. */
function canonicalFilter(f: BulkFilter): string {
  const tags = canonicalTags(f.tags);
  return JSON.stringify({
    ...(f.client ? { client: f.client } : {}),
    ...(f.since !== undefined ? { since: f.since } : {}),
    ...(f.status ? { status: f.status } : {}),
    ...(tags ? { tags: JSON.parse(tags) as Record<string, string> } : {}),
    ...(f.workflow ? { workflow: f.workflow } : {}),
  });
}

/** `client`: the client a client-scoped subject names, whose tasks only the handler may read (decision 0017). */
type Handler = (data: Uint8Array, client?: string) => Promise<unknown>;

/** Every endpoint: each operation on `api.<op>`, and the client-scoped task reads on `api.client.*.<op>`. */
function endpoints(subjects: Names['subjects']): { name: string; subject: string }[] {
  return [
    ...API_OPS.map((op) => ({ name: endpointName(op), subject: subjects.api(op) })),
    ...CLIENT_SCOPED_OPS.map((op) => ({ name: endpointName(op, true), subject: subjects.clientApi('*', op) })),
  ];
}

export class ApiServer {
  private sub: Subscription | undefined;
  private discovery: Discovery | undefined;
  /** Requests, errors and handling time per endpoint (by name): the service framework's stats. */
  private readonly stats: Map<string, EndpointStats>;
  /** Bulk operations' records (decision 0021 §2.2). */
  private readonly ops: OpStore;
  /** Schedules (decision 0019 §6): created, changed and removed here; fired by the leader supervisor. */
  private readonly schedules: ScheduleStore;
  /** Workflow versions' bounds in ms (task.stuck). */
  private readonly bounds = new Map<string, number | undefined>();

  constructor(
    private readonly bus: Bus,
    private readonly tasks: TaskStore,
    private readonly workflows: WorkflowStore,
    private readonly intake: IntakeStore,
    private readonly dispatcher: Dispatcher,
    private readonly schedulerId: string,
    private readonly withTaskLease: <T>(taskId: string, fn: (lease: LeaseClaim) => Promise<T>) => Promise<T | { nakDelayMs: number }>,
    private readonly flow: FlowControl,
    private readonly log: Logger = silentLogger,
    private readonly payloads?: PayloadStore,
  ) {
    this.ops = new OpStore(tasks.redis, tasks.namespace);
    this.stats = new Map(endpoints(bus.names.subjects).map((e) => [e.name, { requests: 0, errors: 0, lastError: '', processingNs: 0 }]));
    this.schedules = new ScheduleStore(tasks.redis, bus.names.namespace);
  }

  /** A workflow version's bound in ms (decision 0009, with the default supervision figures), cached: versions never change. */
  private async boundOf(workflow: string, version: number): Promise<number | undefined> {
    const key = `${workflow}@${version}`;
    if (this.bounds.has(key)) return this.bounds.get(key);
    const def = await this.workflows.get(workflow, version);
    let bound: number | undefined;
    if (def) {
      // A child step's bound is its child workflow's, as the scheduler resolves it (pinned, else latest).
      const found = new Map<string, WorkflowDefinition | undefined>();
      const queue = childReferences(def);
      for (let next = queue.shift(); next !== undefined && found.size < 50; next = queue.shift()) {
        const k = `${next.workflow}@${next.version ?? 'latest'}`;
        if (found.has(k)) continue;
        const child = await this.workflows.get(next.workflow, next.version);
        found.set(k, child);
        if (child) queue.push(...childReferences(child));
      }
      const b = taskBound(def, DEFAULT_SUPERVISION, (n, v) => found.get(`${n}@${v ?? 'latest'}`));
      bound = b.unknown ? undefined : b.totalMs;
    }
    // An unknown version may be registered later; a child's latest version may change: only a computed bound of a workflow without children is kept.
    if (bound !== undefined && def && childReferences(def).length === 0) this.bounds.set(key, bound);
    return bound;
  }

  /** The smallest bound of any version of the workflows (or of `workflow`): no younger task can be past its bound. */
  private async smallestBound(workflow?: string): Promise<number> {
    let min = Number.POSITIVE_INFINITY;
    for (const w of await this.workflows.list()) {
      if (workflow !== undefined && w.name !== workflow) continue;
      for (const v of w.versions) {
        const b = await this.boundOf(w.name, v);
        if (b !== undefined && b < min) min = b;
      }
    }
    return min;
  }

  private handlers(): Record<ApiOp, Handler> {
    const req = <S extends z.ZodType>(data: Uint8Array, schema: S, what: string): z.output<S> => {
      const d = decode(data, schema, what);
      if (!d.ok) throw d.error;
      return d.value;
    };
    return {
      'workflow.register': async (data) => {
        // The definition itself is checked by validateDefinition, which lists every problem at once.
        const { definition } = req(data, RegisterWorkflowRequestSchema, 'workflow.register request');
        const def = validateDefinition(definition);
        const unsupported = unsupportedFeatures(def, SCHEDULER_FEATURES);
        if (unsupported.length > 0) {
          throw new TriadError(ErrorCode.InvalidDefinition, `workflow "${def.name}" cannot be registered: ${unsupported.join('; ')}`, { details: unsupported });
        }
        const childWarnings = await this.childProblems(def);
        const r = await this.workflows.register(def, Date.now());
        const warnings = [...(await this.agentWarnings(def)), ...childWarnings, ...(await this.limitWarnings(def))];
        this.log.info({ workflow: def.name, version: r.version, created: r.created, warnings }, 'workflow registered');
        return { name: def.name, ...r, warnings };
      },
      'workflow.get': async (data) => {
        const { name, version } = req(data, GetWorkflowRequestSchema, 'workflow.get request');
        const wf = await this.workflows.get(name, version);
        if (!wf) throw unknownWorkflow(name, version);
        return wf;
      },
      'workflow.list': async (data) => {
        req(data, ListWorkflowsRequestSchema, 'workflow.list request');
        return this.workflows.list();
      },
      'task.get': async (data, client) => {
        const { taskId } = req(data, GetTaskRequestSchema, 'task.get request');
        // Another client's task is answered exactly as a missing one (decision 0017).
        // A queued phase's place in line is read from its limiter (decision 0020 §6: only when one is queued).
        return requireTask(client === undefined ? await this.tasks.getTask(taskId, { places: true }) : await this.tasks.getTaskOf(taskId, client, { places: true }), taskId);
      },
      'task.retry': async (data) => {
        const q = req(data, RetryTaskRequestSchema, 'task.retry request');
        return this.underTaskLease(q.taskId, async (lease) => {
          const now = Date.now();
          const t = await this.tasks.retryStep({
            lease,
            taskId: q.taskId,
            now,
            schedulerId: this.schedulerId,
            ...(q.step ? { step: q.step } : {}),
            ...(q.replaceInput ? { input: encode(q.input) } : {}),
          });
          const wf = await this.workflows.get(t.workflow, t.version);
          if (!wf) throw unknownWorkflow(t.workflow, t.version);
          await this.dispatcher.publish(q.taskId, wf, t, now);
          this.log.info({ taskId: q.taskId, step: t.step, attempt: t.dispatch[0]?.attempt, newInput: q.replaceInput }, 'operator retry');
          return { taskId: q.taskId, step: t.step, attempt: t.dispatch[0]?.attempt ?? 0 };
        });
      },
      'task.cancel': async (data) => {
        const q = req(data, CancelTaskRequestSchema, 'task.cancel request');
        return this.underTaskLease(q.taskId, async (lease) => {
          const now = Date.now();
          const t = await this.tasks.cancelTask({ lease, taskId: q.taskId, reason: q.reason ?? 'cancelled by an operator', now, schedulerId: this.schedulerId });
          const wf = await this.workflows.get(t.workflow, t.version);
          if (!wf) throw unknownWorkflow(t.workflow, t.version);
          await this.dispatcher.publish(q.taskId, wf, t, now);
          this.log.info({ taskId: q.taskId, compensations: t.dispatch.length }, 'task cancelled');
          return { taskId: q.taskId, status: t.status };
        });
      },
      'task.signal': async (data, client) => {
        const q = req(data, SignalRequestSchema, 'task.signal request');
        const bytes = q.data === undefined ? undefined : encode(q.data);
        if (bytes && bytes.length > MAX_SIGNAL_DATA_BYTES) {
          throw new TriadError(ErrorCode.InvalidMessage, `the data of signal ${q.name} is ${bytes.length} bytes encoded, above the ${MAX_SIGNAL_DATA_BYTES} a signal may carry; send less (a reference to the data, not the data)`);
        }
        return this.underTaskLease(q.taskId, async (lease) => {
          const now = Date.now();
          const r = await this.tasks.signalTask({ lease, taskId: q.taskId, name: q.name, signalId: q.signalId, ...(bytes ? { data: bytes } : {}), ...(client !== undefined ? { client } : {}), now, schedulerId: this.schedulerId });
          if (r.outcome !== 'duplicate') {
            const t = r.transition;
            const wf = await this.workflows.get(t.workflow, t.version);
            if (!wf) throw unknownWorkflow(t.workflow, t.version);
            await this.dispatcher.publish(q.taskId, wf, t, now);
          }
          this.log.info({ taskId: q.taskId, signal: q.name, signalId: q.signalId, outcome: r.outcome, step: r.step, by: client ?? 'operator' }, 'signal');
          return { taskId: q.taskId, name: q.name, signalId: q.signalId, outcome: r.outcome, ...(r.step ? { step: r.step } : {}) };
        });
      },
      'alert.list': async (data) => {
        req(data, EmptyRequestSchema, 'alert.list request');
        return this.tasks.openAlerts();
      },
      'supervisor.status': async (data) => {
        req(data, EmptyRequestSchema, 'supervisor.status request');
        return this.tasks.supervisorStatus();
      },
      'task.list': async (data, client) => {
        const q = req(data, ListTasksRequestSchema, 'task.list request');
        return this.tasks.listTasks({ limit: q.limit, ...(q.status ? { status: q.status } : {}), ...(client !== undefined ? { client } : {}) });
      },
      'task.query': async (data, client) => {
        const q = req(data, TaskQuerySchema, 'task.query request');
        const r = await this.tasks.queryTasks(scopedFilter(q, client), q.limit, q.cursor);
        return { tasks: r.tasks, ...(r.next ? { next: r.next } : {}), scanned: r.scanned };
      },
      'task.count': async (data, client) => {
        const q = req(data, TaskCountRequestSchema, 'task.count request');
        return this.tasks.countTasks(scopedFilter(q, client));
      },
      'task.stuck': async (data, client) => {
        const q = req(data, TaskStuckRequestSchema, 'task.stuck request');
        if (client !== undefined && q.client !== undefined && q.client !== client) {
          throw new TriadError(ErrorCode.InvalidMessage, `client "${q.client}" is not this subject's client ("${client}"): a client lists only its own tasks; leave client out`);
        }
        const owner = client ?? q.client;
        const minBoundMs = await this.smallestBound(q.workflow);
        const r = await findStuck(this.tasks.redis, this.tasks.keys, {
          now: Date.now(),
          limit: q.limit,
          scan: q.scan,
          graceMs: STUCK_GRACE_MS,
          minBoundMs,
          boundOf: (w, v) => this.boundOf(w, v),
          ...(q.workflow ? { workflow: q.workflow } : {}),
          ...(q.tags && Object.keys(q.tags).length > 0 ? { tags: q.tags } : {}),
          ...(owner !== undefined ? { client: owner } : {}),
        });
        return r;
      },
      'bulk.start': async (data) => {
        const q = req(data, BulkStartRequestSchema, 'bulk.start request');
        const status = q.filter.status ?? (q.action === 'cancel' ? 'running' : 'failed');
        const allowed: readonly TaskStatus[] = q.action === 'cancel' ? ['running'] : ['failed', 'compensation_failed'];
        if (!allowed.includes(status)) {
          throw new TriadError(ErrorCode.InvalidMessage, `a bulk ${q.action} acts on ${allowed.join(' or ')} tasks, not ${status}: drop the status or use one of those`);
        }
        if (!q.filter.tags && !q.filter.workflow) {
          throw new TriadError(ErrorCode.InvalidMessage, `a bulk ${q.action} needs tags or a workflow in its filter: name the tasks it may act on`);
        }
        const filter: BulkFilter = { ...q.filter, status };
        const id = q.opId ?? `op-${randomBytes(8).readBigUInt64BE().toString(32).padStart(12, '0').slice(-12)}`;
        const existing = q.opId ? await this.ops.get(id) : undefined;
        const asOf = existing?.asOf ?? Date.now();
        const matched = existing ? existing.matched : (await this.tasks.countTasks({ ...scopedFilter(filter, undefined), until: asOf })).count;
        const r = await this.ops.start({ id, action: q.action, filter: canonicalFilter(filter), ...(q.step ? { step: q.step } : {}), reason: q.reason ?? `bulk ${q.action} ${id}`, asOf, by: 'operator', matched, now: Date.now() });
        this.log.info({ op: id, action: q.action, filter, matched, resumed: r.resumed }, 'bulk operation started');
        return r;
      },
      'bulk.apply': async (data) => {
        const q = req(data, BulkApplyRequestSchema, 'bulk.apply request');
        const op = await this.ops.get(q.opId);
        if (!op) throw unknownOp(q.opId);
        const expectStatus = (op.filter.status ?? (op.action === 'cancel' ? 'running' : 'failed'));
        const fence = { id: op.id, expectStatus, createdBefore: op.asOf };
        const results: { taskId: string; outcome: BulkOutcome; reason?: string }[] = [];
        for (const taskId of q.taskIds) {
          try {
            await this.underTaskLease(taskId, async (lease) => {
              const now = Date.now();
              const t =
                op.action === 'cancel'
                  ? await this.tasks.cancelTask({ lease, taskId, reason: op.reason ?? `bulk cancel ${op.id}`, now, schedulerId: this.schedulerId, op: fence })
                  : await this.tasks.retryStep({ lease, taskId, ...(op.step ? { step: op.step } : {}), now, schedulerId: this.schedulerId, op: fence });
              // Acted (the operation's id is in the task): a request lost here goes out again through the
              // supervisor's complete-by, as after any crash between a transition and its publishes.
              const wf = await this.workflows.get(t.workflow, t.version);
              if (wf) await this.dispatcher.publish(taskId, wf, t, now).catch((e: unknown) => this.log.warn({ taskId, op: op.id, err: errorMessage(e) }, 'bulk act recorded; its requests will be sent again at their complete-by'));
              return {};
            });
            results.push({ taskId, outcome: 'acted' });
          } catch (e) {
            const code = e instanceof TriadError ? e.code : undefined;
            if (isAlreadyApplied(e)) results.push({ taskId, outcome: 'already' });
            else if (code === ErrorCode.UnknownTask) results.push({ taskId, outcome: 'missing' });
            else if (code === ErrorCode.InvalidState || code === ErrorCode.UnknownStep) results.push({ taskId, outcome: 'skipped', reason: errorMessage(e) });
            else results.push({ taskId, outcome: 'failed', reason: errorMessage(e) });
          }
        }
        return { results };
      },
      'bulk.checkpoint': async (data) => {
        const q = req(data, BulkCheckpointRequestSchema, 'bulk.checkpoint request');
        return this.ops.checkpoint(q.opId, q.batch, q.cursor, q.counts, Date.now());
      },
      'bulk.end': async (data) => {
        const q = req(data, BulkEndRequestSchema, 'bulk.end request');
        return this.ops.end(q.opId, q.state, Date.now());
      },
      'bulk.get': async (data) => {
        const q = req(data, BulkGetRequestSchema, 'bulk.get request');
        const op = await this.ops.get(q.opId);
        if (!op) throw unknownOp(q.opId);
        return op;
      },
      'bulk.list': async (data) => {
        const q = req(data, BulkListRequestSchema, 'bulk.list request');
        return this.ops.list(q.limit);
      },
      'payload.put': async (data, client) => {
        const q = req(data, PayloadPutRequestSchema, 'payload.put request');
        // The payload broker (decision 0021 §4, settled with 0022): a client's account has no JetStream,
        // so its uploads go through here, into its own bucket only — the subject names the client.
        const owner = payloadOwner(client, q.client);
        const store = this.payloadStore();
        const bucket = store.bucketOf(owner);
        if (q.part === 0) await store.ensureBucket(owner);
        await store.putPart(bucket, q.upload, q.part, q.data);
        if (!q.last) return { part: q.part };
        const ref = await store.commit(bucket, inputObjectName(q.taskId, q.upload), q.upload, q.last.parts, q.last.size, q.last.sha256);
        this.log.info({ client: owner, taskId: q.taskId, object: ref.name, size: ref.size }, 'input object stored');
        return { part: q.part, ref };
      },
      'payload.get': async (data, client) => {
        const q = req(data, PayloadGetRequestSchema, 'payload.get request');
        const ns = this.bus.names.namespace;
        const owner = bucketClient(ns, q.bucket);
        if (owner === undefined) throw new TriadError(ErrorCode.InvalidMessage, `bucket ${q.bucket} is not an object store bucket of namespace ${ns}: use the bucket of an object reference`);
        // A client reads its own bucket only (decision 0017's guarantee, for payloads).
        if (client !== undefined && owner !== client) throw new TriadError(ErrorCode.InvalidMessage, `bucket ${q.bucket} is client ${owner}'s, not this subject's client ("${client}"): a client reads only its own tasks' payloads`);
        return this.payloadStore().readChunk(q.bucket, q.name, q.nuid !== undefined && q.from !== undefined ? { nuid: q.nuid, from: q.from } : undefined);
      },
      'task.events': async (data, client) => {
        const q = req(data, TaskEventsRequestSchema, 'task.events request');
        // A client's subject holds only its own tasks' events: the subject is the ownership check.
        const s = this.bus.names.subjects;
        const owner = client ?? q.client;
        return readTaskEvents(this.bus, owner === undefined ? s.eventOfTask(q.taskId) : s.event(owner, q.taskId), q.taskId, q.from);
      },
      'agentLimit.set': async (data) => {
        const l = req(data, AgentLimitSchema, 'agentLimit.set request');
        const warnings = (await this.agentWarnings({ steps: [{ agent: l.agent }] } as unknown as WorkflowDefinition)).map(() => `no agent "${l.agent}" has connected in namespace "${this.bus.names.namespace}" yet: the limit is stored and applies when its steps are dispatched`);
        warnings.push(...(await this.unboundedCallers(l.agent)));
        // An older scheduler would dead-letter the limits' commands: refused until every process runs them.
        const outdated = await this.limitsProbe();
        if (outdated.length > 0) throw new TriadError(ErrorCode.InvalidState, outdated.join('; '), { details: outdated });
        return this.flow.set(l, warnings);
      },
      'agentLimit.list': async (data) => this.flow.list(req(data, AgentLimitListRequestSchema, 'agentLimit.list request')),
      'agentLimit.clear': async (data) => this.flow.clear(req(data, AgentLimitClearRequestSchema, 'agentLimit.clear request').agent),
      'intake.set': async (data) => {
        const q = req(data, SetLimitRequestSchema, 'intake.set request');
        const limit = { client: q.client, ratePerSecond: q.ratePerSecond, burst: q.burst ?? Math.max(1, Math.ceil(q.ratePerSecond)), setAt: Date.now() };
        await this.intake.setLimit(limit);
        this.log.info({ ...limit }, 'submission rate limit set');
        return limit;
      },
      'intake.clear': async (data) => {
        const q = req(data, ClearLimitRequestSchema, 'limit.clear request');
        const cleared = await this.intake.clearLimit(q.client);
        this.log.info({ client: q.client, cleared }, 'submission rate limit cleared');
        return { client: q.client, cleared };
      },
      'intake.list': async (data) => {
        req(data, EmptyRequestSchema, 'limit.list request');
        return this.intake.limits();
      },
      'schedule.create': async (data) => {
        const q = req(data, CreateScheduleRequestSchema, 'schedule.create request');
        const timing = scheduleTiming(q);
        if (!(await this.workflows.get(q.workflow, q.version))) throw unknownWorkflow(q.workflow, q.version);
        const now = Date.now();
        const next = nextTick({ ...timing, anchor: now }, now);
        const def = {
          name: q.name,
          workflow: q.workflow,
          ...(q.version !== undefined ? { version: q.version } : {}),
          client: q.client ?? DEFAULT_CLIENT_ID,
          ...(timing.every !== undefined ? { every: timing.every } : {}),
          ...(timing.cron !== undefined ? { cron: timing.cron, timezone: timing.timezone ?? 'UTC' } : {}),
          overlap: q.overlap,
          ...(q.input !== undefined ? { input: encode(q.input) } : {}),
        };
        const r = await this.schedules.put(def, next, now, q.replace);
        this.log.info({ schedule: q.name, workflow: q.workflow, every: timing.every, cron: timing.cron, created: r.created, generation: r.generation, nextTick: next }, r.created ? 'schedule created' : 'schedule replaced');
        return { ...(await this.schedule(q.name)), created: r.created };
      },
      'schedule.get': async (data) => {
        const { name } = req(data, ScheduleNameRequestSchema, 'schedule.get request');
        return this.schedule(name);
      },
      'schedule.list': async (data) => {
        req(data, EmptyRequestSchema, 'schedule.list request');
        return (await this.schedules.list()).map(scheduleView);
      },
      'schedule.pause': async (data) => {
        const { name } = req(data, ScheduleNameRequestSchema, 'schedule.pause request');
        const changed = await this.schedules.setPaused(name, true, undefined, Date.now());
        this.log.info({ schedule: name, changed }, 'schedule paused');
        return this.schedule(name);
      },
      'schedule.resume': async (data) => {
        const { name } = req(data, ScheduleNameRequestSchema, 'schedule.resume request');
        const s = await this.schedules.get(name);
        if (!s) throw unknownSchedule(name);
        // From now on: the ticks of the paused period are not caught up (decision 0019 §6.2).
        const now = Date.now();
        const next = nextTick({ ...storedTiming(s), anchor: s.anchor }, now);
        const changed = await this.schedules.setPaused(name, false, next, now);
        this.log.info({ schedule: name, changed, nextTick: next }, 'schedule resumed');
        return this.schedule(name);
      },
      'schedule.delete': async (data) => {
        const { name } = req(data, ScheduleNameRequestSchema, 'schedule.delete request');
        await this.schedules.delete(name);
        this.log.info({ schedule: name }, 'schedule deleted');
        return { name, deleted: true };
      },
    };
  }

  private payloadStore(): PayloadStore {
    if (!this.payloads) throw new TriadError(ErrorCode.Unavailable, 'this scheduler serves no payloads: it was started without an object store');
    return this.payloads;
  }

  private async schedule(name: string): Promise<Schedule> {
    const s = await this.schedules.get(name);
    if (!s) throw unknownSchedule(name);
    return scheduleView(s);
  }

  /** An operator's operation under the task's lease; while another scheduler holds it, tried a few times. */
  private async underTaskLease<T extends object>(taskId: string, fn: (lease: LeaseClaim) => Promise<T>): Promise<T> {
    for (let tries = 0; tries < 5; tries++) {
      const done = await this.withTaskLease(taskId, fn);
      if (!('nakDelayMs' in done)) return done;
      await new Promise((r) => setTimeout(r, done.nakDelayMs));
    }
    throw new TriadError(ErrorCode.Unavailable, `task ${taskId} is being worked on by another scheduler right now; try again`);
  }

  /**
   * What registration checks in other workflows (decision 0019 §1.5): a child workflow that is not
   * registered is a warning (it may be registered later; a child step whose workflow is still unknown
   * fails when it starts); a cycle of child workflows, through the latest or the pinned versions, is
   * refused (each task would start another without end).
   */
  private async childProblems(def: WorkflowDefinition): Promise<string[]> {
    if (childReferences(def).length === 0) return [];
    // The definition being registered is what its own name resolves to (its latest version from now on).
    const resolve = await childResolver(def, async (name, version) => (name === def.name && version === undefined ? def : this.workflows.get(name, version)));
    const unknown = taskBound(def, DEFAULT_SUPERVISION, resolve).unknown ?? [];
    const cycle = unknown.map((u) => /child workflows form a cycle: [^)]*/.exec(u)?.[0]).find((c) => c !== undefined);
    if (cycle) throw new TriadError(ErrorCode.InvalidDefinition, `workflow "${def.name}" cannot be registered: ${cycle}; a workflow may not start itself through its children`, { details: [cycle] });
    return childReferences(def)
      .filter((c) => resolve(c.workflow, c.version) === undefined)
      .map((c) => `step "${c.step}" starts workflow "${c.workflow}"${c.version !== undefined ? ` version ${c.version}` : ''}, which is not registered yet: the step fails when it starts until it is`);
  }

  /**
   * Agents a definition names that have never connected in this namespace (no durable consumer on the
   * steps stream). A warning, not a refusal: agents are often deployed after their workflows.
   */
  /**
   * Decision 0020 §5.6: waiting for a dispatch limit is outside a definition's bounds; `deadlineMs` is what
   * caps a task's total time. A workflow registered without one that calls a limited agent type is warned.
   */
  private async limitWarnings(def: WorkflowDefinition): Promise<string[]> {
    if (def.deadlineMs !== undefined) return [];
    const limited = await this.flow.limitedAgents().catch(() => new Set<string>());
    return [...agentsOf(def)].filter((a) => limited.has(a)).map((a) => `agent "${a}" has a dispatch limit and this workflow sets no deadlineMs: its tasks may wait for that limit without a bound (set deadlineMs to cap a task's total time)`);
  }

  /**
   * Decision 0020 §1.8's probe: every scheduler that answers discovery (`$SRV.INFO`, 500 ms) and every
   * supervisor that reported within the last minute must announce `limits1` — an older scheduler would
   * dead-letter `queue_step` and `pump_limit`. What must be upgraded, one line each (empty: none).
   */
  private async limitsProbe(): Promise<string[]> {
    const n = this.bus.names;
    const outdated: string[] = [];
    try {
      const replies = await this.bus.nc.requestMany(`$SRV.INFO.triad-${n.namespace}`, undefined, { strategy: 'timer', maxWait: LIMITS_PROBE_WAIT_MS });
      for await (const m of replies) {
        let info: { id?: unknown; metadata?: { protocol?: unknown; features?: unknown } | null };
        try {
          info = JSON.parse(new TextDecoder().decode(m.data)) as typeof info;
        } catch {
          continue;
        }
        const features = typeof info.metadata?.features === 'string' ? info.metadata.features.split(',') : [];
        if (!features.includes(LIMITS_FEATURE)) {
          outdated.push(`${typeof info.id === 'string' ? info.id : 'a scheduler'} (protocol ${typeof info.metadata?.protocol === 'string' ? info.metadata.protocol : '?'}, no "${LIMITS_FEATURE}") must be upgraded before limits can be set`);
        }
      }
    } catch (e) {
      this.log.debug({ err: errorMessage(e) }, 'limits probe: the schedulers did not answer discovery');
    }
    const now = Date.now();
    for (const sup of (await this.tasks.supervisorStatus()).supervisors) {
      if (now - Number(sup['at'] ?? 0) > SUPERVISOR_REPORT_FRESH_MS) continue;
      const features = Array.isArray(sup['features']) ? sup['features'] : [];
      if (!features.includes(LIMITS_FEATURE)) outdated.push(`supervisor ${typeof sup['supervisorId'] === 'string' ? sup['supervisorId'] : '?'} (no "${LIMITS_FEATURE}") must be upgraded before limits can be set`);
    }
    return outdated;
  }

  /** The latest versions of the workflows that call `agent` and set no deadlineMs (`triad limits set`'s warning, §1.8). */
  private async unboundedCallers(agent: string): Promise<string[]> {
    const names: string[] = [];
    try {
      for (const w of await this.workflows.list()) {
        const def = await this.workflows.get(w.name);
        if (def && def.deadlineMs === undefined && agentsOf(def).has(agent)) names.push(w.name);
      }
    } catch (e) {
      this.log.debug({ err: errorMessage(e) }, 'could not read the workflows for the limit warning');
      return [];
    }
    if (names.length === 0) return [];
    const list = names.length > 10 ? `${names.slice(0, 10).join(', ')} and ${names.length - 10} more` : names.join(', ');
    return [`workflow${names.length === 1 ? '' : 's'} ${list} call${names.length === 1 ? 's' : ''} ${agent} and set${names.length === 1 ? 's' : ''} no deadlineMs: their tasks may now wait for this limit without a bound (decision 0020 §5.6)`];
  }

  private async agentWarnings(def: WorkflowDefinition): Promise<string[]> {
    const n = this.bus.names;
    const known = new Set<string>();
    try {
      for await (const c of this.bus.jsm.consumers.list(n.streams.steps)) known.add(c.name);
    } catch (e) {
      this.log.debug({ err: errorMessage(e) }, 'could not list agent consumers');
      return [];
    }
    const warnings: string[] = [];
    for (const agent of agentsOf(def)) {
      if (!known.has(n.consumers.agent(agent))) {
        warnings.push(`no agent "${agent}" has connected in namespace "${n.namespace}" yet: its steps will wait until one starts`);
      }
    }
    return warnings;
  }

  start(): void {
    const handlers = this.handlers();
    const n = this.bus.names;
    this.discovery = new Discovery({
      nc: this.bus.nc,
      name: `triad-${n.namespace}`,
      id: this.schedulerId,
      version: `${PROTOCOL_MAJOR}.0.0`,
      description: `Triad scheduler API of namespace ${n.namespace} (docs/protocol.md)`,
      // features: the step features of decision 0019 it runs, comma-separated ('' = plain agent steps only).
      // …and limits1: it runs dispatch limits (decision 0020 §1.8; a limit is set only when every scheduler does).
      metadata: { namespace: n.namespace, protocol: `${PROTOCOL_MAJOR}`, features: [...SCHEDULER_FEATURES, LIMITS_FEATURE].join(',') },
      queueGroup: n.queueGroup,
      endpoints: endpoints(n.subjects),
      stats: (name) => this.stats.get(name) ?? { requests: 0, errors: 0, lastError: '', processingNs: 0 },
      log: this.log,
      refused: (msg, reason) => void this.refuse(msg, 'discovery', reason),
    });
    this.discovery.start();
    this.sub = this.bus.nc.subscribe(this.bus.names.subjects.apiAll, {
      queue: this.bus.names.queueGroup,
      callback: (err, msg) => {
        if (err) {
          this.log.warn({ err: errorMessage(err) }, 'api subscription error');
          return;
        }
        void this.answer(handlers, msg);
      },
    });
  }

  private async answer(handlers: Record<ApiOp, Handler>, msg: Msg): Promise<void> {
    let reply: ApiReply;
    const started = performance.now();
    const request = this.bus.names.apiRequest(msg.subject);
    const endpoint = request ? endpointName(request.op, request.client !== undefined) : 'unknown';
    const stats = request ? this.stats.get(endpoint) : undefined;
    if (msg.reply) {
      const allowed = apiReplyAllowed(this.bus.names, request, msg.reply);
      if (!allowed.ok) return this.refuse(msg, endpoint, allowed.reason);
    }
    try {
      const foreign = unsupportedVersion(msg.headers);
      if (foreign) throw new TriadError(ErrorCode.InvalidMessage, foreign);
      if (!request) {
        const scoped = CLIENT_SCOPED_OPS.map((op) => this.bus.names.subjects.clientApi('<client>', op)).join(', ');
        throw new TriadError(ErrorCode.InvalidMessage, `unknown API operation ${msg.subject}; the operations are ${API_OPS.join(', ')}, and a client's own ${scoped}`);
      }
      reply = { ok: true, value: await handlers[request.op](msg.data, request.client) };
    } catch (e) {
      const te = e instanceof TriadError ? e : new TriadError(ErrorCode.Internal, errorMessage(e), { cause: e });
      if (te.code === ErrorCode.Internal) this.log.error({ err: te.message, subject: msg.subject }, 'api request failed');
      reply = { ok: false, error: bounded(te.toWire()) };
      if (stats) {
        stats.errors++;
        stats.lastError = te.message.slice(0, 500);
      }
    }
    if (stats) {
      stats.requests++;
      stats.processingNs += Math.round((performance.now() - started) * 1e6);
    }
    if (msg.reply) {
      try {
        msg.respond(encode(reply), { headers: protocolHeaders() });
      } catch (e) {
        msg.respond(encode({ ok: false, error: new TriadError(ErrorCode.PayloadTooLarge, errorMessage(e)).toWire() }), { headers: protocolHeaders() });
      }
    }
  }

  /**
   * A request whose reply subject is not its requester's inbox: not run, not answered; counted, logged
   * and dead-lettered with the reason (decision 0022).
   */
  private async refuse(msg: Msg, endpoint: string, reason: string): Promise<void> {
    const n = this.bus.names;
    triadMetrics().apiRequestsRefused.inc({ namespace: n.namespace, endpoint });
    this.log.warn({ subject: msg.subject, reply: msg.reply, reason }, 'api request refused: its reply subject is not the requester\'s inbox');
    await deadLetter(this.bus, 'api', `${msg.subject}: ${reason}`, msg.data, 1, { subject: msg.subject, headers: msg.headers });
  }

  async stop(): Promise<void> {
    await this.discovery?.stop();
    if (this.sub) await this.sub.drain().catch(() => undefined);
  }
}

/**
 * An error as it fits in a reply: errors can quote the request (a definition's problems name its steps),
 * so a huge request would otherwise get a reply too large to send instead of the reason.
 */
function bounded(w: WireError): WireError {
  const clip = (s: string, max: number): string => (s.length > max ? `${s.slice(0, max)}… (${s.length} characters)` : s);
  const details = w.details ?? [];
  const more = details.length > MAX_LISTED_ISSUES ? [`… and ${details.length - MAX_LISTED_ISSUES} more`] : [];
  return { code: w.code, message: clip(w.message, 8 * MAX_ISSUE_CHARS), details: [...details.slice(0, MAX_LISTED_ISSUES).map((d) => clip(d, MAX_ISSUE_CHARS)), ...more] };
}

/**
 * A schedule request's timing, checked with core's schedule module (decision 0019 §6.1): exactly one of
 * every and cron; every within 1 s … 30 days; a cron pattern croner accepts in an IANA time zone.
 */
export function scheduleTiming(q: { every?: number | string | undefined; cron?: string | undefined; timezone?: string | undefined }): Omit<ScheduleTiming, 'anchor'> {
  if ((q.every === undefined) === (q.cron === undefined)) {
    throw new TriadError(ErrorCode.InvalidMessage, `a schedule fires either every interval or by a cron pattern: give exactly one of --every (e.g. 10s) and --cron (e.g. "0 2 * * *")${q.every !== undefined ? ', not both' : ''}`);
  }
  if (q.every !== undefined) {
    if (q.timezone !== undefined) throw new TriadError(ErrorCode.InvalidMessage, `--timezone applies to --cron only: an --every schedule counts from its creation, in no time zone; drop --timezone`);
    try {
      return { every: parseEvery(q.every) };
    } catch (e) {
      throw new TriadError(ErrorCode.InvalidMessage, errorMessage(e));
    }
  }
  const cron = q.cron ?? '';
  const problems = cronProblems(cron, q.timezone);
  if (problems.length > 0) throw new TriadError(ErrorCode.InvalidMessage, problems.join('; '), { details: problems });
  return { cron, timezone: q.timezone ?? 'UTC' };
}

function storedTiming(s: StoredSchedule): Omit<ScheduleTiming, 'anchor'> {
  return s.every !== undefined ? { every: s.every } : { cron: s.cron ?? '', timezone: s.timezone ?? 'UTC' };
}

/** A stored schedule as the API shows it (without the leader's working fields). */
function scheduleView(s: StoredSchedule): Schedule {
  const { since: _since, anchor: _anchor, inputBytes: _bytes, ...view } = s;
  return view;
}

export function unknownWorkflow(name: string, version?: number): TriadError {
  return new TriadError(
    ErrorCode.UnknownWorkflow,
    version === undefined
      ? `unknown workflow "${name}": register it first (triad workflows register <file>, or client.registerWorkflow())`
      : `workflow "${name}" has no version ${version}: list versions with triad workflows`,
  );
}

/** The agent types a definition calls: its steps' and their compensations'. */
function agentsOf(def: Pick<WorkflowDefinition, 'steps'>): Set<string> {
  return new Set(def.steps.flatMap((s) => [...(s.agent !== undefined ? [s.agent] : []), ...(s.compensate ? [s.compensate.agent] : [])]));
}
