/**
 * The Scheduler actor: consumes submissions and agent results, applies each as one atomic store
 * transition, and publishes what the transition decided (step requests, task events). It keeps no state
 * a crash can lose: every message stays unacknowledged until its transition and publishes are done.
 */
import { randomUUID } from 'node:crypto';
import {
  deadLetter,
  PayloadStore,
  ensureConsumer,
  ensureStreams,
  publishDurable,
  publishTaskEvents,
  publishPlain,
  REPLY_TO_HEADER,
  startConsumer,
  type Bus,
  type Disposition,
  type RunningConsumer,
  type TopologyOptions,
} from '@triad/bus';
import type { MsgHdrs } from '@nats-io/nats-core';
import {
  DEFAULT_THROTTLE_RETRY_AFTER_MS,
  ErrorCode,
  MAX_THROTTLE_RETRY_AFTER_MS,
  TaskIdSchema,
  decodeResults,
  decodeWithOpaquePayload,
  errorMessage,
  SubmissionSchema,
  SupervisorCommandSchema,
  TriadError,
  decode,
  encode,
  isTerminal,
  msgpackField,
  unpackLeading,
  unpackTrusted,
  isObjectRef,
  isTriadValue,
  ObjectRefSchema,
  bucketClient,
  isInputObjectOf,
  isOutputObjectOf,
  objectBucket,
  outputObjectPrefix,
  type ObjectRef,
  type RegisteredWorkflow,
  type ResultItem,
  type SupervisorCommand,
  type TaskEvent,
  type TaskEventBatch,
} from '@triad/protocol';
import { silentLogger, type Logger } from '@triad/telemetry';
import { IntakeStore, LimitStore, isLeaseBusy, type LeaseClaim, type Leases, type TaskStore } from '@triad/store';
import { ROOT_CONTEXT, contextFromHeaders, intercept, type Next } from '@triad/telemetry';
import { resolveSchedulerSettings, type ResolvedSchedulerSettings, type SchedulerSettings } from './options.js';
import { countResult, countSubmission, limitMetrics, schedulerMetrics, traceCommand, traceResult, traceSubmission, type CommandInput, type ResultInput, type ResultOutcome, type SchedulerMetrics, type SubmissionInput, type SubmissionOutcome } from './telemetry.js';
import { ApiServer, unknownWorkflow } from './api.js';
import { Dispatcher } from './dispatcher.js';
import { FlowControl } from './flow-control.js';
import { ChildOperations } from './children.js';

export interface SchedulerOptions extends SchedulerSettings {
  bus: Bus;
  /** The task store; its workflow store (`tasks.workflows`) is the process's one cache of versions and plans. */
  tasks: TaskStore;
  /** Leases: each operation on a task holds the task's lease (taken inside its transition). */
  leases: Leases;
  /** Per-client submission rate limits (decision 0022); default: in the workflows' Redis. */
  intake?: IntakeStore;
  id?: string;
  logger?: Logger;
  topology?: TopologyOptions;
}

export class Scheduler {
  readonly id: string;
  private readonly log: Logger;
  private readonly dispatcher: Dispatcher;
  /** Dispatch limits (decision 0020): tickets to the limiters, grants started, limiter timers. */
  readonly flow: FlowControl;
  private readonly api: ApiServer;
  private readonly intake: IntakeStore;
  private consumers: RunningConsumer[] = [];
  /** The tail of each task's queue of operations in this process (see withTaskLease). */
  private readonly taskQueues = new Map<string, Promise<void>>();
  /** Admitted tasks being started (decision 0024), awaited by stop(). */
  private readonly admitting = new Set<Promise<void>>();
  private stopped = false;
  private readonly metrics: SchedulerMetrics;
  /** The settings, every default applied (options.ts). */
  readonly settings: ResolvedSchedulerSettings;
  /** The handlers inside their interceptors (tracing, metrics). */
  private readonly handleSubmission: Next<SubmissionInput, SubmissionOutcome>;
  private readonly handleResult: Next<ResultInput, ResultOutcome>;
  private readonly handleCommand: Next<CommandInput, Disposition>;
  /** Large payloads (decision 0021 §4): client buckets ensured here, and the payload broker's store. */
  readonly payloads: PayloadStore;

  constructor(private readonly o: SchedulerOptions) {
    this.settings = resolveSchedulerSettings(o);
    this.id = o.id ?? `scheduler-${randomUUID().slice(0, 8)}`;
    this.log = o.logger ?? silentLogger;
    this.payloads = new PayloadStore(o.bus, { maxObjectBytes: this.settings.maxObjectBytes, ...(o.topology?.replicas !== undefined ? { replicas: o.topology.replicas } : {}) });
    this.dispatcher = new Dispatcher(o.bus, { stepBatchMax: this.settings.stepBatchMax, eventBatches: this.settings.eventBatches, logger: this.log });
    this.intake = o.intake ?? new IntakeStore(o.tasks.redis, o.bus.names.namespace, this.log);
    const ns = o.bus.names.namespace;
    this.metrics = schedulerMetrics(ns);
    this.handleSubmission = intercept((i) => this.receive(i), traceSubmission(ns), countSubmission(this.metrics));
    this.handleResult = intercept((i) => this.applyResult(i), traceResult(ns), countResult(this.metrics));
    this.handleCommand = intercept((i) => this.runCommand(i.command), traceCommand(ns));
    const children = new ChildOperations(o.tasks, this.id, (taskId, fn) => this.withTaskLease(taskId, fn), (taskId, wf, t, now) => this.dispatcher.publish(taskId, wf, t, now), this.log);
    this.dispatcher.onChildOperation((taskId, wf, t, d) => children.apply(taskId, wf, t, d));
    this.flow = new FlowControl({
      tasks: o.tasks,
      limits: o.tasks.limits?.store ?? new LimitStore(o.tasks.redis, ns),
      schedulerId: this.id,
      withTaskLease: (taskId, fn) => this.withTaskLease(taskId, fn),
      workflow: (name, version) => this.workflow(name, version),
      publish: (taskId, wf, t, now) => this.dispatcher.publish(taskId, wf, t, now),
      log: this.log,
      metrics: limitMetrics(ns),
    });
    this.dispatcher.onLimiter = (r) => this.flow.apply(r);
    this.dispatcher.onAdmit = (ids) => {
      for (const id of ids) this.startAdmitted(id);
    };
    this.api = new ApiServer(o.bus, o.tasks, o.tasks.workflows, this.intake, this.dispatcher, this.id, (taskId, fn) => this.withTaskLease(taskId, fn), this.flow, this.log, this.payloads);
  }

  async start(): Promise<void> {
    const { bus } = this.o;
    const n = bus.names;
    await ensureStreams(bus, this.o.topology);
    const { ackWaitMs, concurrency } = this.settings;
    await ensureConsumer(bus, { stream: n.streams.submit, durable: n.consumers.scheduler, filterSubject: n.subjects.submitAll, ackWaitMs });
    await ensureConsumer(bus, { stream: n.streams.results, durable: n.consumers.results, filterSubject: n.subjects.resultAll, ackWaitMs });
    await ensureConsumer(bus, { stream: n.streams.commands, durable: n.consumers.commands, filterSubject: n.subjects.command, ackWaitMs });
    this.api.start();
    this.consumers = [
      startConsumer(bus, { stream: n.streams.submit, durable: n.consumers.scheduler, source: 'submit', concurrency, logger: this.log }, (d) =>
        this.onSubmission(d.data, d.deliveryCount, d.subject, d.headers),
      ),
      startConsumer(bus, { stream: n.streams.results, durable: n.consumers.results, source: 'result', concurrency, logger: this.log }, (d) =>
        this.onResult(d.data, d.deliveryCount, d.subject, d.headers),
      ),
      startConsumer(bus, { stream: n.streams.commands, durable: n.consumers.commands, source: 'command', concurrency, logger: this.log }, (d) =>
        this.onCommand(d.data, d.headers),
      ),
    ];
    await Promise.all(this.consumers.map((c) => c.ready));
    this.log.info({ schedulerId: this.id, namespace: n.namespace }, 'scheduler started');
  }

  async stop(): Promise<void> {
    await this.api.stop();
    await Promise.all(this.consumers.map((c) => c.stop()));
    await this.flow.stop();
    this.stopped = true;
    await Promise.allSettled([...this.admitting]);
  }

  /**
   * Starts a task that a transition of this process admitted (decision 0024), under its lease, not awaited by
   * the handler that admitted it. A failure or a stop leaves it to the leader supervisor, which starts it once
   * its `#admit` member falls due.
   */
  private startAdmitted(taskId: string): void {
    const p = (async () => {
      for (let tries = 0; tries < 20 && !this.stopped; tries++) {
        const out = await this.withTaskLease(taskId, async (lease) => {
          const now = Date.now();
          const r = await this.o.tasks.admitTask({ lease, taskId, now, schedulerId: this.id });
          if (r.started) {
            const wf = await this.workflow(r.transition.workflow, r.transition.version);
            if (!wf) throw new Error(`workflow ${r.transition.workflow} v${r.transition.version} of task ${taskId} is not registered`);
            await this.dispatcher.publish(taskId, wf, r.transition, now);
          }
          return r;
        });
        if (!('nakDelayMs' in out)) return;
        await new Promise((r) => setTimeout(r, out.nakDelayMs));
      }
    })().catch((e: unknown) => this.log.warn({ err: errorMessage(e), taskId }, 'an admitted task was not started; the supervisor starts it when its admission falls due'));
    this.admitting.add(p);
    void p.finally(() => this.admitting.delete(p));
  }

  private async workflow(name: string, version?: number): Promise<RegisteredWorkflow | undefined> {
    return this.o.tasks.workflows.get(name, version);
  }

  /**
   * A submission. Its subject names the submitting client (decision 0010): the task is recorded as
   * that client's, its events go out under it, and its reply subject must be in that client's inbox.
   */
  async onSubmission(data: Uint8Array, deliveryCount: number, subject: string, headers?: MsgHdrs): Promise<Disposition> {
    return (await this.handleSubmission({ data, deliveryCount, subject, headers })).disposition;
  }

  private async receive({ data, deliveryCount, subject, headers }: SubmissionInput): Promise<SubmissionOutcome> {
    const client = this.o.bus.names.submitter(subject);
    if (!client) {
      return { outcome: 'rejected', reason: 'subject', disposition: { deadLetter: `submission on ${subject}: the subject must name the submitting client (triad.<ns>.submit.<client>)` } };
    }
    // A large submission's input is carried as its bytes, never decoded here (decision 0025).
    const opaque = decodeWithOpaquePayload(data, SubmissionSchema, 'submission', 'input');
    const d = opaque ? (opaque.ok ? { ok: true as const, value: opaque.value.value } : opaque) : decode(data, SubmissionSchema, 'submission');
    if (!d.ok) {
      await this.rejectUnparsed(client, data, d.error, headers);
      return { outcome: 'rejected', reason: 'invalid', client, disposition: { deadLetter: d.error.message } };
    }
    const sub = d.value;
    const seen = { taskId: sub.taskId, workflow: sub.workflow, client };
    const refuse = async (err: TriadError, o: { answerReplyTo: boolean; reason: string }): Promise<SubmissionOutcome> => {
      await this.reject(client, sub.taskId, err, o.answerReplyTo ? sub.replyTo : undefined);
      return { ...seen, outcome: 'rejected', reason: o.reason, disposition: { deadLetter: err.message } };
    };
    const inbox = `${this.o.bus.names.subjects.inboxPrefix(client)}.`;
    if (sub.replyTo !== undefined && !sub.replyTo.startsWith(inbox)) {
      // Never publish to a subject the submitter does not own: the scheduler is no relay.
      return refuse(
        new TriadError(ErrorCode.InvalidMessage, `submission ${sub.taskId}: replyTo "${sub.replyTo}" is not in client ${client}'s inbox; use a subject starting with ${inbox} (the SDK's replySubject() does)`),
        { answerReplyTo: false, reason: 'reply_to' },
      );
    }
    // Over its client's rate limit: put back until the slot reserved for it (decision 0022).
    const waitMs = await this.admit(client, sub.taskId);
    if (waitMs > 0) return { ...seen, outcome: 'delayed', delayMs: waitMs, disposition: { nakDelayMs: waitMs } };
    const compiled = await this.o.tasks.workflows.compiled(sub.workflow, sub.version);
    if (!compiled) return refuse(unknownWorkflow(sub.workflow, sub.version), { answerReplyTo: true, reason: 'unknown_workflow' });
    const wf = compiled.workflow;
    // The input as the submission carries it (validated with it): stored and sent on as bytes, never encoded again.
    const input = opaque?.ok ? Buffer.from(opaque.value.payload) : payloadBytes(data, 'input');
    // An input in the object store (decision 0021 §4.5): it must be this client's upload for this task.
    let objects: string[] | undefined;
    if (isObjectRef(input)) {
      const checked = this.inputReference(input, client, sub.taskId);
      if (checked instanceof TriadError) return refuse(checked, { answerReplyTo: true, reason: 'reference' });
      objects = [checked.name];
    }
    // The client's bucket exists before its task does: an agent writing a large output finds it (agents
    // never create streams). Once per client and process; a failure is logged, not the submission's.
    await this.payloads.ensureBucket(client).catch((e: unknown) => this.log.warn({ client, err: errorMessage(e) }, 'object store bucket not ensured'));
    const done = await this.withTaskLease(sub.taskId, async (lease): Promise<SubmissionOutcome> => {
      const now = Date.now();
      const created = await this.o.tasks.createTask({
        lease,
        taskId: sub.taskId,
        workflow: wf.name,
        version: wf.version,
        input,
        plan: compiled.plan,
        planJson: compiled.planJson,
        onFailure: wf.onFailure,
        ...(wf.deadlineMs !== undefined ? { deadlineMs: wf.deadlineMs } : {}),
        client,
        ...(sub.priority !== undefined ? { priority: sub.priority } : {}),
        maxActive: this.settings.clientActiveTasks,
        now,
        schedulerId: this.id,
        ...(sub.replyTo ? { replyTo: sub.replyTo } : {}),
        ...(sub.tags && Object.keys(sub.tags).length > 0 ? { tags: sub.tags } : {}),
        ...(objects ? { objects } : {}),
      });
      if (!created.created) {
        if (created.client !== client) {
          // Another client's task id: never merged into it (its events are not this client's to see).
          const r = await refuse(new TriadError(ErrorCode.InvalidState, `submission ${sub.taskId}: the task id is taken by another client; submit with a new task id`), { answerReplyTo: true, reason: 'task_id_taken' });
          return { ...r, disposition: { deadLetter: `task id ${sub.taskId} is taken by client ${created.client}, submitted again by ${client}` } };
        }
        // A redelivery after a crash between the transition and its publishes: send the in-flight
        // step requests again (message ids make this harmless if they did go out).
        if (deliveryCount > 1 && !isTerminal(created.status)) await this.redispatch(sub.taskId);
        return { ...seen, outcome: 'duplicate', disposition: 'ack' };
      }
      await this.dispatcher.publish(sub.taskId, wf, created.transition, now);
      return { ...seen, outcome: 'accepted', disposition: 'ack' };
    });
    return 'nakDelayMs' in done ? { ...seen, outcome: 'busy', disposition: done } : done;
  }

  /** A submission's input reference, checked: this client's bucket, this task's input name (§4.5). */
  private inputReference(bytes: Uint8Array, client: string, taskId: string): ObjectRef | TriadError {
    const ref = parseReference(bytes, `submission ${taskId}: the input`);
    if (ref instanceof TriadError) return ref;
    const bucket = objectBucket(this.o.bus.names.namespace, client);
    if (ref.bucket !== bucket || !isInputObjectOf(ref.name, taskId)) {
      return new TriadError(
        ErrorCode.InvalidMessage,
        `submission ${taskId}: the input reference points to bucket ${ref.bucket} / object ${ref.name}, not this client's bucket ${bucket} under ${taskId}/in/: upload the input as the SDK does`,
      );
    }
    return ref;
  }

  /** 0 when the client's rate limit (if any) lets this submission through now, else how long to put it back. */
  private async admit(client: string, taskId: string): Promise<number> {
    const now = Date.now();
    const limit = await this.intake.limitFor(client, now);
    return limit ? this.intake.take(client, taskId, limit, now) : 0;
  }

  /**
   * Runs one operation on a task under the task's lease, which the operation's transition takes
   * atomically with its write (decision 0006), and releases it once the publishes are done. Operations
   * on one task in this process run one after the other, so they never find each other's lease; when
   * another scheduler holds it, the transition writes nothing and the message is put back for a moment.
   */
  private withTaskLease<T>(taskId: string, fn: (lease: LeaseClaim) => Promise<T>): Promise<T | { nakDelayMs: number }> {
    const run = (this.taskQueues.get(taskId) ?? Promise.resolve()).then(() => this.underLease(taskId, fn));
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.taskQueues.set(taskId, tail);
    void tail.then(() => {
      if (this.taskQueues.get(taskId) === tail) this.taskQueues.delete(taskId);
    });
    return run;
  }

  private async underLease<T>(taskId: string, fn: (lease: LeaseClaim) => Promise<T>): Promise<T | { nakDelayMs: number }> {
    const lease = this.o.leases.task(taskId);
    let result: T;
    try {
      result = await fn(lease);
    } catch (e) {
      if (isLeaseBusy(e)) {
        this.metrics.leaseBusy.inc();
        return { nakDelayMs: 20 + Math.floor(Math.random() * 50) };
      }
      void this.o.leases.release(lease);
      throw e;
    }
    // Not awaited: it goes out on the same connection before this process's next script on the task,
    // and another scheduler waits at most for the lease's expiry if the release is lost.
    void this.o.leases.release(lease);
    return result;
  }

  /**
   * A results message: one result, or a batch an agent sent under load (decision 0008). A bare result
   * is acknowledged, put back or dead-lettered as a whole; a batch is acknowledged once each of its
   * results has been applied, found stale, dead-lettered on its own, or (when another scheduler holds its
   * task's lease for long) handed back to the stream as a message of its own.
   */
  async onResult(data: Uint8Array, deliveryCount: number, subject: string, headers?: MsgHdrs): Promise<Disposition> {
    // The agent type the result claims to come from is the subject it was allowed to publish on.
    const agentType = this.o.bus.names.resultAgent(subject);
    if (!agentType) {
      return { deadLetter: `result on ${subject}: the subject must name the agent type (triad.<ns>.result.<agent>)` };
    }
    const d = decodeResults(data);
    if (!d.ok) return { deadLetter: d.error.message };
    const { single, items } = d.value;
    const first = items[0];
    // A single result continues the trace of the attempt that sent it (its `traceparent` header); each
    // result of a batch continues its own, from the batch's `traceparents` (decision 0013).
    if (single && first?.ok) return (await this.handleResult({ result: first.value, bytes: first.bytes, output: first.output, agentType, deliveryCount, parent: contextFromHeaders(headers), batched: false })).disposition;
    const settled = await Promise.allSettled(items.map((item) => this.applyBatched(item, agentType, subject, deliveryCount)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    // Redelivered whole: the results applied meanwhile are then rejected as stale, never applied twice.
    if (failed) throw failed.reason;
    this.metrics.resultBatches.inc();
    return 'ack';
  }

  private async applyBatched(item: ResultItem, agentType: string, subject: string, deliveryCount: number): Promise<void> {
    const { bus } = this.o;
    // A dead letter that was not stored fails the batch, which is then redelivered whole (not lost).
    const deadLettered = async (reason: string): Promise<void> => {
      if (!(await deadLetter(bus, 'result', reason, item.bytes, deliveryCount, { subject }))) throw new Error(`the dead letter of a batched result was not stored: ${reason}`);
    };
    if (!item.ok) {
      await deadLettered(item.error.message);
      return;
    }
    for (let tries = 0; ; tries++) {
      const parent = item.traceparent ? contextFromHeaders({ get: (k) => (k === 'traceparent' ? (item.traceparent ?? '') : '') }) : ROOT_CONTEXT;
      const { disposition: d } = await this.handleResult({ result: item.value, bytes: item.bytes, output: item.output, agentType, deliveryCount, parent, batched: true });
      if (d === 'ack' || d === 'defer') return;
      if ('deadLetter' in d) {
        await deadLettered(d.deadLetter);
        return;
      }
      if (tries >= 4) {
        await publishDurable(bus, subject, item.bytes);
        return;
      }
      await new Promise((r) => setTimeout(r, d.nakDelayMs));
    }
  }

  /** `bytes`: the result as the agent encoded it; its output is stored as those bytes, not encoded again. */
  private async applyResult({ result: r, bytes, output: opaqueOutput, agentType, deliveryCount }: ResultInput): Promise<ResultOutcome> {
    // An output in the object store (decision 0021 §4.5): the object must be this very attempt's upload,
    // in a bucket of this namespace; the script checks the bucket is the task's client's.
    const output = r.ok ? (opaqueOutput ? Buffer.from(opaqueOutput) : payloadBytes(bytes, 'output')) : undefined;
    let outputObject: { client: string; name: string } | undefined;
    if (output && isObjectRef(output)) {
      const ns = this.o.bus.names.namespace;
      const where = `result for ${r.taskId}/${r.step} attempt ${r.attempt}: the output`;
      const ref = parseReference(output, where);
      const prefix = outputObjectPrefix(r.taskId, r.step, r.kind, r.attempt, r.item);
      const refClient = ref instanceof TriadError ? undefined : bucketClient(ns, ref.bucket);
      if (ref instanceof TriadError || refClient === undefined || !isOutputObjectOf(ref.name, prefix)) {
        const reason =
          ref instanceof TriadError
            ? ref.message
            : `${where} refers to bucket ${ref.bucket} / object ${ref.name}, not a bucket of namespace ${ns} under ${prefix}: an agent uploads its output under its own step attempt`;
        this.log.warn({ taskId: r.taskId, step: r.step, attempt: r.attempt, agentType, reason }, 'output reference refused');
        return { result: 'forged', disposition: { deadLetter: `refused reference: ${reason}` } };
      }
      outputObject = { client: refClient, name: ref.name };
    }
    const done = await this.withTaskLease(r.taskId, async (lease): Promise<ResultOutcome> => {
      const now = Date.now();
      // A throttle pauses the agent type in a limiter (decision 0020 §5): one without a limit gets a pause-only one first.
      if (!r.ok && r.error.throttled && !r.error.circuitOpen && r.error.retryable) {
        await this.flow.beforeThrottle(agentType, now + Math.min(r.error.retryAfterMs ?? DEFAULT_THROTTLE_RETRY_AFTER_MS, MAX_THROTTLE_RETRY_AFTER_MS));
      }
      const outcome = await this.o.tasks
        .applyResult({
          lease,
          taskId: r.taskId,
          step: r.step,
          kind: r.kind,
          attempt: r.attempt,
          now,
          schedulerId: this.id,
          agentId: r.agentId,
          agentType,
          ...(r.item !== undefined ? { item: r.item } : {}),
          ...(outputObject ? { outputObject } : {}),
          outcome: r.ok
            ? { ok: true, output: output ?? payloadBytes(bytes, 'output') }
            : {
                ok: false,
                message: r.error.message,
                retryable: r.error.retryable,
                // Absent: an agent that made no call cannot have taken effect (decision 0009).
                effect: r.error.effect ?? (r.tries === 0 ? 'none' : 'unknown'),
                ...(r.error.circuitOpen ? { circuitOpenRetryAfterMs: r.error.retryAfterMs ?? 0 } : {}),
                // A throttle (decision 0020 §5): parked per step until the service's Retry-After (1 s when
                // absent, at most an hour), a refusal rather than a failure. A permanent failure stays one.
                ...(r.error.throttled && !r.error.circuitOpen && r.error.retryable ? { throttledRetryAfterMs: Math.min(r.error.retryAfterMs ?? DEFAULT_THROTTLE_RETRY_AFTER_MS, MAX_THROTTLE_RETRY_AFTER_MS) } : {}),
              },
        })
        .catch((e: unknown) => {
          if (e instanceof TriadError && (e.code === 'UNKNOWN_TASK' || e.code === 'UNKNOWN_STEP'))
            return { applied: false as const, reason: e.message, unknown: true };
          throw e;
        });
      if (!outcome.applied) {
        if ('unknown' in outcome) return { result: 'unknown', disposition: { deadLetter: outcome.reason } };
        if (outcome.forged) {
          this.log.warn({ taskId: r.taskId, step: r.step, attempt: r.attempt, agentType, agentId: r.agentId, reason: outcome.reason }, 'forged result rejected');
          return { result: 'forged', disposition: { deadLetter: `forged result rejected: ${outcome.reason}` } };
        }
        this.log.warn({ taskId: r.taskId, step: r.step, attempt: r.attempt, agentId: r.agentId, reason: outcome.reason }, 'stale result rejected');
        // The permit of that attempt, if it held one and its release was lost (decision 0020 Q12).
        if (outcome.release) await this.flow.release(outcome.release);
        if (deliveryCount > 1) await this.redispatch(r.taskId);
        return { result: 'stale', disposition: 'ack' };
      }
      const wf = await this.workflow(outcome.transition.workflow, outcome.transition.version);
      if (!wf) throw new Error(`workflow ${outcome.transition.workflow} v${outcome.transition.version} of task ${r.taskId} is not registered`);
      await this.dispatcher.publish(r.taskId, wf, outcome.transition, now);
      return { result: 'applied', disposition: 'ack' };
    });
    return 'nakDelayMs' in done ? { result: 'busy', disposition: done } : done;
  }

  /**
   * A supervisor command. The supervisor has already made the fenced transition (new attempt, new
   * completeBy); the scheduler sends the step request if that attempt is still the current one.
   */
  async onCommand(data: Uint8Array, headers?: MsgHdrs): Promise<Disposition> {
    const d = decode(data, SupervisorCommandSchema, 'supervisor command');
    if (!d.ok) return { deadLetter: d.error.message };
    return this.handleCommand({ command: d.value, headers });
  }

  /**
   * Sends the request the supervisor's transition started, if that attempt is still the step's current
   * one: read field by field (no whole-record read) and without the task's lease — nothing is written,
   * and a request sent twice is one message (its id) and one attempt (the fence on its result).
   */
  private async runCommand(cmd: SupervisorCommand): Promise<Disposition> {
    if (cmd.type === 'pump_limit') {
      await this.flow.pump(cmd.agent);
      return 'ack';
    }
    if (cmd.type === 'queue_step') {
      // A supervisor transition queued a phase (decision 0020 §2.5): its ticket to the limiter if it still waits with it.
      const q = await this.o.tasks.queuedPhase(cmd.taskId, cmd.step, cmd.kind, cmd.ticket);
      if (q) await this.flow.queue(q.agent, q.item);
      else this.log.debug({ ...cmd }, 'queue command is stale (the phase no longer waits with that ticket)');
      return 'ack';
    }
    const t = await this.o.tasks.stepInFlight(cmd.taskId, cmd.step, cmd.kind, cmd.attempt, cmd.item);
    if (!t) {
      this.log.debug({ ...cmd }, 'retry command is stale (task finished or attempt superseded)');
      return 'ack';
    }
    const wf = await this.workflow(t.workflow, t.version);
    if (!wf) throw new Error(`workflow ${t.workflow} v${t.version} of task ${cmd.taskId} is not registered`);
    await this.dispatcher.publish(cmd.taskId, wf, t, Date.now());
    return 'ack';
  }

  /** Re-sends the requests of a task's processing steps (same attempt, same completeBy). */
  private async redispatch(taskId: string): Promise<void> {
    const t = await this.o.tasks.inFlight(taskId);
    if (!t || (t.dispatch.length === 0 && !t.limiter)) return;
    const wf = await this.workflow(t.workflow, t.version);
    if (wf) await this.dispatcher.publish(taskId, wf, t, Date.now());
  }

  /**
   * A submission that did not decode or validate: answer it wherever that can be done safely — on the
   * submitter's reply subject (from the body, else the `Triad-Reply-To` header: it survives a body that
   * cannot be read), only if it is in the client's own inbox; and in the task's event stream when a
   * usable task id can be read (the body, else the `Nats-Msg-Id` header `<client>:<taskId>`), so a
   * waiting client ends with the reason.
   */
  private async rejectUnparsed(client: string, data: Uint8Array, err: TriadError, headers?: MsgHdrs): Promise<void> {
    let raw: { taskId?: unknown; replyTo?: unknown } = {};
    try {
      // Its first value even when bytes follow it (itself a reason to refuse it, protocol §1).
      const v = unpackLeading(data);
      if (v !== null && typeof v === 'object') raw = v;
    } catch {
      // not msgpack: only the headers can say where to answer
    }
    const msgId = headers?.get('Nats-Msg-Id') ?? '';
    const idFromHeader = msgId.startsWith(`${client}:`) ? msgId.slice(client.length + 1) : undefined;
    const taskId = [raw.taskId, idFromHeader].find((x): x is string => typeof x === 'string' && TaskIdSchema.safeParse(x).success);
    const inbox = `${this.o.bus.names.subjects.inboxPrefix(client)}.`;
    // Only a reply subject the schema allows, in the client's inbox: NATS closes the connection of a client
    // that publishes to an over-long subject (its control line limit), which would cut off this scheduler.
    const replyTo = [raw.replyTo, headers?.get(REPLY_TO_HEADER)].find(
      (x): x is string => typeof x === 'string' && x.startsWith(inbox) && SubmissionSchema.shape.replyTo.safeParse(x).success,
    );
    if (taskId !== undefined) {
      await this.reject(client, taskId, err, replyTo).catch((e: unknown) => this.log.warn({ err: errorMessage(e), taskId }, 'rejection not published'));
      return;
    }
    if (replyTo === undefined) return;
    // The id as submitted when it can be read at all (a client matches refusals by it), even one that is
    // not a valid task id and so could name no event subject; 'unknown' only when none can be read.
    const asSubmitted = typeof raw.taskId === 'string' && raw.taskId.length >= 1 && raw.taskId.length <= 128 ? raw.taskId : undefined;
    const ev: TaskEvent = { taskId: asSubmitted ?? 'unknown', seq: 0, type: 'rejected', at: Date.now(), reason: err.message.slice(0, 4000), error: err.toWire() };
    try {
      const batch: TaskEventBatch = { taskId: ev.taskId, events: [ev] };
      publishPlain(this.o.bus, replyTo, encode(batch));
    } catch {
      // an unusable reply subject: the dead letter still records the reason
    }
  }

  private async reject(client: string, taskId: string, err: TriadError, replyTo?: string): Promise<void> {
    const ev: TaskEvent = { taskId, seq: 0, type: 'rejected', at: Date.now(), reason: err.message, error: err.toWire() };
    await publishTaskEvents(this.o.bus, client, taskId, [ev], replyTo);
  }
}

/** An object reference's bytes decoded and validated (only the reference is decoded, never a payload). */
function parseReference(bytes: Uint8Array, what: string): ObjectRef | TriadError {
  let value: unknown;
  try {
    value = unpackTrusted(bytes);
  } catch (e) {
    return new TriadError(ErrorCode.InvalidMessage, `${what} is not valid msgpack (${errorMessage(e)})`);
  }
  if (!isTriadValue(value)) return new TriadError(ErrorCode.InvalidMessage, `${what} is not an object reference`);
  if (value.$triad !== 'object') return new TriadError(ErrorCode.InvalidMessage, `${what} is an unknown Triad value "${String(value.$triad)}": this scheduler is older than its writer`);
  const p = ObjectRefSchema.safeParse(value);
  if (!p.success) return new TriadError(ErrorCode.InvalidMessage, `${what} is an invalid object reference: ${p.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return p.data;
}

/**
 * A payload field of a message that was decoded and validated (a submission's input, a result's output),
 * as the sender encoded it: a copy of its bytes (the message buffer is the client library's), or what
 * encode() writes for an absent value.
 */
function payloadBytes(message: Uint8Array, field: 'input' | 'output'): Uint8Array {
  const raw = msgpackField(message, field);
  return raw ? Buffer.from(raw) : encode(undefined);
}
