/**
 * The client SDK: everything a submitting application does, over NATS only — register workflows,
 * submit tasks (optionally with a private reply subject), wait for outcomes, watch and replay a task's
 * events, and read task state; for operators also dead letters and submission rate limits.
 *
 * @example
 *   const client = await TriadClient.connect({ natsUrl: 'nats://127.0.0.1:4222', namespace: 'default' });
 *   // or with the settings of the environment (NATS_URL, NATS_CREDS, NATS_TLS_CA, TRIAD_NAMESPACE, ...):
 *   const fromEnv = await TriadClient.connect(clientOptionsFromEnv());
 *   await client.registerWorkflow(ordersDefinition);
 *   const { taskId } = await client.submit('orders', { orderId: 'o1', amount: 42 });
 *   const state = await client.wait(taskId, { timeoutMs: 30_000 });
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { nuid, type Msg, type Subscription } from '@nats-io/nats-core';
import { REPLY_TO_HEADER, connectBus, explainPermissionViolation, isBacklogFull, mib, offloadValue, protocolHeaders, publishRetrying, readObject, resolveRefs, sha256Hex, type Bus } from '@triad/bus';
import { SpanKind, inSpan } from '@triad/telemetry';
import { runBulkOperation, type BulkApi, type BulkRunOptions } from './bulk.js';
import { getDeadLetter, listDeadLetters, replayDeadLetter, type DeadLetterQuery, type ReplayResult, type StoredDeadLetter } from './dead-letters.js';
import {
  ApiReplySchema,
  CLIENT_SCOPED_OPS,
  ClientIdSchema,
  DEFAULT_CLIENT_ID,
  ErrorCode,
  names,
  SubmissionSchema,
  ProbeReplySchema,
  type ProbeReply,
  type ProbeRequest,
  DEFAULT_PRIORITY,
  TaskEventBatchSchema,
  EVENT_BATCH_REPLY_MARK,
  decodeTaskEventMessage,
  TriadError,
  decode,
  encode,
  errorMessage,
  isTerminal,
  validate,
  type Alert,
  type ApiOp,
  type ClientLimit,
  parseRate,
  type AgentLimit,
  type AgentLimitSetReply,
  type AgentLimitStatus,
  type AgentLimitClearReply,
  type Schedule,
  type ScheduleOverlap,
  type SupervisorHealth,
  type RegisteredWorkflow,
  type Submission,
  type TaskEvent,
  type TaskState,
  type SignalReply,
  type TaskStatus,
  type TaskSummary,
  type TaskQuery,
  type TaskQueryReply,
  type TaskCountRequest,
  type TaskCountReply,
  type TaskStuckRequest,
  type TaskStuckReply,
  type BulkOp,
  type WorkflowDefinitionInput,
  DEFAULT_INLINE_MAX_BYTES,
  DEFAULT_MAX_OBJECT_BYTES,
  OBJECT_CHUNK_BYTES,
  type ObjectRef,
  unpackTrusted,
} from '@triad/protocol';
import { DEFAULT_NATS_URL, type NatsConnectionOptions } from '@triad/settings';

/**
 * Where and how to connect. The NATS credentials and TLS files are the same settings as the
 * environment's (NATS_CREDS, NATS_NKEY_SEED, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_TLS_CA/CERT/KEY):
 * at most one auth method; clientOptionsFromEnv() reads them all.
 */
export interface ClientOptions extends Omit<NatsConnectionOptions, 'url'> {
  /** One NATS server URL, or several comma-separated; default nats://127.0.0.1:4222. */
  natsUrl?: string;
  namespace?: string;
  /**
   * The identity this client submits and reads under (TRIAD_CLIENT_ID; default "default"): part of its
   * submit subject, its tasks' event subjects and its inbox, which credentials can confine it to
   * (decision 0010).
   */
  clientId?: string;
  name?: string;
  /** Timeout of API requests. */
  requestTimeoutMs?: number;
  /** Wait for NATS if it is not up yet (services) instead of failing at once (the default, for tools). */
  waitForServer?: boolean;
  /**
   * Which tasks `getTask`/`listTasks` read (decision 0017). `auto` (default): the namespace's, on
   * `api.task.get/list`; once NATS refuses those (a client identity), this client's own, on
   * `api.client.<clientId>.task.get/list`. `own`: this client's from the start. `all`: never switch.
   */
  reads?: TaskReads;
  /**
   * How long `submit()` keeps trying while this client's submission backlog is full (JetStream refuses
   * more than TRIAD_SUBMIT_BACKLOG_PER_CLIENT waiting submissions of one client; decision 0022) before it
   * fails with the reason. Default 60 s.
   */
  backlogWaitMs?: number;
  /**
   * Inputs whose msgpack encoding is above this many bytes are uploaded to the object store and sent as a
   * reference (TRIAD_INLINE_MAX_BYTES; default 256 KiB; decision 0021 §4).
   */
  inlineMaxBytes?: number;
  /** The largest input uploaded or object downloaded (TRIAD_MAX_OBJECT_BYTES; default 64 MiB). */
  maxObjectBytes?: number;
}

export type TaskReads = 'auto' | 'own' | 'all';

export interface SubmitOptions {
  taskId?: string;
  version?: number;
  /** A private subject the scheduler publishes this task's events to. */
  replyTo?: string;
  /**
   * 1 (highest) … 5 (lowest), default 3: orders the task's steps that wait for a dispatch limit of their
   * agent type (decision 0020): among waiting steps the higher priority goes first, and a step moves up one
   * level for every 30 s it waits.
   */
  priority?: number;
  /**
   * Search attributes (decision 0021): at most 16, key a letter then ≤ 31 letters, digits, "_", "." or
   * "-", value 1–128 bytes; `queryTasks({ tags })` and `triad list --tag k=v` find the task by them.
   */
  tags?: Record<string, string>;
}

/** A supervisor's last report, and when it was written (epoch ms). */
export type SupervisorReport = SupervisorHealth & { at: number };

export interface SupervisorStatus {
  leader?: { id: string; epoch: number };
  supervisors: SupervisorReport[];
}

export interface WorkflowSummary {
  name: string;
  latest: number;
  versions: number[];
  description?: string;
}

/** The task's stored events as `task.events` answers them (decision 0022). */
export interface TaskEventsPage {
  events: TaskEvent[];
  /** The stream sequence to read on from. */
  next: number;
  /** More were stored than one reply holds: ask again from `next`. */
  more: boolean;
}

/** How long signal() waits for a task this client just submitted to exist; how many such ids it remembers. */
const SIGNAL_WAIT_FOR_TASK_MS = 15_000;
const SUBMITTED_LATELY_MAX = 10_000;

/** The most attempts one `probe()` asks about (decision 0021 §3.3). */
const MAX_PROBES = 20;

export class TriadClient {
  /** While JetStream refuses this client's submissions (its backlog is full), they try one at a time, in order. */
  private backlogLine: Promise<unknown> = Promise.resolve();
  private waitingInLine = 0;
  /**
   * Tasks this client submitted lately (task id → when): a submission is a task only once a scheduler
   * took it, so a signal sent right after it may find no task yet — for these, signal() waits for it.
   */
  private readonly submittedLately = new Map<string, number>();

  private constructor(
    readonly bus: Bus,
    /** The identity this client submits and reads under (decision 0010). */
    readonly clientId: string,
    private readonly requestTimeoutMs: number,
    private reads: TaskReads,
    private readonly backlogWaitMs: number,
    /** Above this many encoded bytes an input is uploaded and sent as a reference. */
    readonly inlineMaxBytes: number = DEFAULT_INLINE_MAX_BYTES,
    readonly maxObjectBytes: number = DEFAULT_MAX_OBJECT_BYTES,
  ) {}

  static async connect(o: ClientOptions = {}): Promise<TriadClient> {
    const { natsUrl, namespace, name, requestTimeoutMs, waitForServer, clientId, reads, backlogWaitMs, inlineMaxBytes, maxObjectBytes, ...nats } = o;
    const ns = namespace ?? 'default';
    const id = ClientIdSchema.safeParse(clientId ?? DEFAULT_CLIENT_ID);
    if (!id.success) {
      throw new TriadError(ErrorCode.InvalidConfig, `client id "${clientId ?? ''}" is invalid (TRIAD_CLIENT_ID): ${id.error.issues[0]?.message ?? 'not a name'}`);
    }
    const bus = await connectBus({
      ...nats,
      url: natsUrl ?? DEFAULT_NATS_URL,
      namespace: ns,
      name: name ?? `triad-client-${process.pid}`,
      connectTimeoutMs: requestTimeoutMs ?? 10_000,
      failFast: !waitForServer,
      inboxPrefix: names(ns).subjects.inboxPrefix(id.data),
    });
    return new TriadClient(bus, id.data, requestTimeoutMs ?? 10_000, reads ?? 'auto', backlogWaitMs ?? 60_000, inlineMaxBytes ?? DEFAULT_INLINE_MAX_BYTES, maxObjectBytes ?? DEFAULT_MAX_OBJECT_BYTES);
  }

  /** A permission NATS refused this client's credentials, explained (decision 0016); else undefined. */
  private refusal(e: unknown): TriadError | undefined {
    for (let c: unknown = e; c instanceof Error; c = c.cause) {
      const explained = explainPermissionViolation(c, this.namespace);
      if (explained) return explained;
    }
    return undefined;
  }

  get namespace(): string {
    return this.bus.names.namespace;
  }

  /**
   * Whose tasks `getTask`/`listTasks` read now: `own` once this client uses its client-scoped subjects
   * (asked to, or NATS refused the namespace-wide ones), else `all` (decision 0017).
   */
  get taskReads(): 'all' | 'own' {
    return this.reads === 'own' ? 'own' : 'all';
  }

  async close(): Promise<void> {
    await this.bus.close();
  }

  /**
   * One API request. On a NATS cluster a scheduler's subscription reaches the other nodes a moment
   * after it subscribed (interest travels over the routes): "no responders" then is retried for up to
   * 3 s — safe, since nobody received the request.
   */
  private async requestOnce(subject: string, body: unknown): Promise<Msg> {
    const deadline = Date.now() + 3_000;
    for (;;) {
      try {
        return await this.bus.nc.request(subject, encode(body), { timeout: this.requestTimeoutMs, headers: protocolHeaders() });
      } catch (e) {
        const noResponders = /no responders/i.test(errorMessage(e));
        if (!noResponders || !this.bus.nc.info?.cluster || Date.now() > deadline) throw e;
        await sleep(100);
      }
    }
  }

  /** The subject of an operation: a task read on this client's own scoped subject once it reads its own. */
  private subjectOf(op: ApiOp): string {
    const scoped = CLIENT_SCOPED_OPS.find((o) => o === op);
    return scoped && this.reads === 'own' ? this.bus.names.subjects.clientApi(this.clientId, scoped) : this.bus.names.subjects.api(op);
  }

  /** Calls a scheduler API operation; throws the TriadError the scheduler answered with. */
  async request<T>(op: ApiOp, body: unknown): Promise<T> {
    let raw;
    const subject = this.subjectOf(op);
    try {
      raw = await this.requestOnce(subject, body);
    } catch (e) {
      const refused = this.refusal(e);
      // A client identity may not read the namespace's tasks: it reads its own from now on (decision 0017);
      // so does a request that was already on its way when another one found that out.
      if (refused && this.reads !== 'all' && subject === this.bus.names.subjects.api(op) && refused.message.includes(`publish to "${subject}"`) && CLIENT_SCOPED_OPS.some((o) => o === op)) {
        this.reads = 'own';
        return this.request(op, body);
      }
      throw refused ?? new TriadError(
        ErrorCode.Unavailable,
        `no scheduler answered ${op} in namespace "${this.namespace}" (${errorMessage(e)}): is a scheduler running with TRIAD_NAMESPACE=${this.namespace}?`,
        { cause: e },
      );
    }
    const reply = decode(raw.data, ApiReplySchema, `${op} reply`);
    if (!reply.ok) throw reply.error;
    if (!reply.value.ok) throw TriadError.fromWire(reply.value.error);
    return reply.value.value as T;
  }

  /** Registers a definition (or a builder's document); the scheduler validates it and lists every problem. */
  async registerWorkflow(
    definition: WorkflowDefinitionInput | { toJSON(): WorkflowDefinitionInput },
  ): Promise<{ name: string; version: number; created: boolean; warnings: string[] }> {
    const doc = 'toJSON' in definition && typeof definition.toJSON === 'function' ? definition.toJSON() : definition;
    return this.request('workflow.register', { definition: doc });
  }

  async getWorkflow(name: string, version?: number): Promise<RegisteredWorkflow> {
    return this.request('workflow.get', version === undefined ? { name } : { name, version });
  }

  async listWorkflows(): Promise<WorkflowSummary[]> {
    return this.request('workflow.list', {});
  }

  /** A task's whole state (only this client's own once it reads its own: `taskReads`). */
  async getTask(taskId: string): Promise<TaskState> {
    return this.request('task.get', { taskId });
  }

  /**
   * Resubmits a failed (or parked) step — the task's failed one unless `step` names another — with a
   * fresh failure budget; `input`, when given, replaces the task input (a corrected one).
   */
  async retry(taskId: string, o: { step?: string; input?: unknown } = {}): Promise<{ taskId: string; step: string; attempt: number }> {
    return this.request('task.retry', { taskId, ...(o.step ? { step: o.step } : {}), ...('input' in o ? { input: o.input, replaceInput: true } : {}) });
  }

  /**
   * Cancels a running task: no new step starts, steps in flight are abandoned, completed steps are
   * compensated in reverse order; the task ends `cancelled` (follow it with `wait`/`watch`).
   */
  async cancel(taskId: string, reason?: string): Promise<{ taskId: string; status: TaskStatus }> {
    return this.request('task.cancel', { taskId, ...(reason ? { reason } : {}) });
  }

  /**
   * Sends a signal to a task (decision 0019 §3): the step that waits for `name` ends with `data` as its
   * output, or — when that step has not started waiting yet — the signal is kept until it does. The id
   * (a new UUID unless `o.id` names one) makes sending it again harmless: a repeat answers `duplicate`.
   * A client identity may signal only its own tasks. Refused (INVALID_STATE) when the task is not running,
   * waits for no such signal, or is past waiting for it; UNAVAILABLE when it holds 16 signals already.
   */
  async signal(taskId: string, name: string, data?: unknown, o: { id?: string } = {}): Promise<SignalReply> {
    const signalId = o.id ?? randomUUID();
    const body = { taskId, name, signalId, ...(data !== undefined ? { data } : {}) };
    const submittedAt = this.submittedLately.get(taskId);
    for (;;) {
      try {
        return await this.request<SignalReply>('task.signal', body);
      } catch (e) {
        // A task this client submitted moments ago may not be a task yet (its submission waits in the
        // stream): ask again with the same id — harmless — for a while.
        const young = submittedAt !== undefined && Date.now() - submittedAt < SIGNAL_WAIT_FOR_TASK_MS;
        if (!young || !(e instanceof TriadError) || e.code !== ErrorCode.UnknownTask) throw e;
        await sleep(200);
      }
    }
  }

  /** Open operator alerts: steps that failed for good and have not been retried since. */
  async alerts(): Promise<Alert[]> {
    return this.request('alert.list', {});
  }

  /**
   * The namespace's dead letters, newest first, each original decoded where it can be (operator role:
   * it reads the DLQ stream).
   */
  async deadLetters(q: DeadLetterQuery = {}): Promise<StoredDeadLetter[]> {
    return listDeadLetters(this.bus, q);
  }

  /** One dead letter, with what a replay would publish (its `replay` plan) or why it cannot be replayed. */
  async deadLetter(seq: number): Promise<StoredDeadLetter> {
    return getDeadLetter(this.bus, seq);
  }

  /**
   * Re-publishes dead letter `seq`'s original to its own source — the subject its DLQ subject implies,
   * never one its body names (decision 0022) — once its cause is fixed. `expectSubject`: the subject the
   * caller showed (the dashboard's confirmation); a plan that differs is refused.
   */
  async replayDeadLetter(seq: number, o: { expectSubject?: string } = {}): Promise<ReplayResult> {
    return replayDeadLetter(this.bus, seq, o);
  }

  /**
   * Sets a client's submission rate limit (`*`: every client without its own): at most `ratePerSecond`
   * submissions a second on average, `burst` at once (default: the rate, at least 1). Stored in Redis;
   * every scheduler applies it within 2 s (operator role; decision 0022).
   */
  async setIntakeLimit(client: string, o: { ratePerSecond: number; burst?: number }): Promise<ClientLimit> {
    return this.request('intake.set', { client, ratePerSecond: o.ratePerSecond, ...(o.burst !== undefined ? { burst: o.burst } : {}) });
  }

  /** Removes a client's submission rate limit (`*`: the default one); `cleared` is false when it had none. */
  async clearIntakeLimit(client: string): Promise<{ client: string; cleared: boolean }> {
    return this.request('intake.clear', { client });
  }

  /** The submission rate limits (operator role). */
  async intakeLimits(): Promise<ClientLimit[]> {
    return this.request('intake.list', {});
  }

  /**
   * Sets an agent type's dispatch limit (operator role; decision 0020): at most `concurrency` of its
   * attempts at once across every scheduler and agent process, `rate` dispatches a second (a number, or
   * the CLI's `100/s`, `600/m`, `1/h`) with `burst`, and per value of `key` (`input.<path>`) the per-key
   * limits. Replaces the agent type's whole limit; every scheduler applies it within 1 s.
   */
  async setAgentLimit(
    agent: string,
    limit: Omit<AgentLimit, 'agent' | 'ratePerSecond' | 'perKeyRatePerSecond'> & { rate?: number | string; perKeyRate?: number | string; ratePerSecond?: number; perKeyRatePerSecond?: number },
  ): Promise<AgentLimitSetReply> {
    const { rate, perKeyRate, ...rest } = limit;
    const perSecond = (v: number | string | undefined, flag: string): number | undefined => {
      if (v === undefined || typeof v === 'number') return v;
      const r = parseRate(v, flag);
      if (!r.ok) throw new TriadError(ErrorCode.InvalidMessage, r.message);
      return r.perSecond;
    };
    const ratePerSecond = perSecond(rate, '--rate') ?? rest.ratePerSecond;
    const perKeyRatePerSecond = perSecond(perKeyRate, '--per-key-rate') ?? rest.perKeyRatePerSecond;
    return this.request('agentLimit.set', { ...rest, agent, ...(ratePerSecond !== undefined ? { ratePerSecond } : {}), ...(perKeyRatePerSecond !== undefined ? { perKeyRatePerSecond } : {}) });
  }

  /** The dispatch limits with what is in flight and waiting (operator role); `keys`: each agent type's keys with the most waiting. */
  async agentLimits(o: { agent?: string; keys?: number } = {}): Promise<AgentLimitStatus[]> {
    return this.request('agentLimit.list', { ...(o.agent !== undefined ? { agent: o.agent } : {}), ...(o.keys !== undefined ? { keys: o.keys } : {}) });
  }

  /** Removes an agent type's dispatch limit; its waiting steps go at once (operator role). */
  async clearAgentLimit(agent: string): Promise<AgentLimitClearReply> {
    return this.request('agentLimit.clear', { agent });
  }

  /**
   * Creates a schedule (operator role; decision 0019 §6): a task of `workflow` with `input` at every tick —
   * `every` (ms, or `10s`, `5m`, `2h`, `1d`; 1 s to 30 days) or `cron` (5 fields, 6 with seconds, in
   * `timezone`, default UTC). The tasks are `client`'s (default: this client's id), their ids
   * `sch:<name>:<tick>`. `overlap: 'skip'` (the default) skips a tick while the previous task still runs.
   * An existing name is refused unless `replace` (which keeps what was fired: no tick fires twice).
   */
  async createSchedule(
    name: string,
    o: { workflow: string; every?: number | string; cron?: string; timezone?: string; input?: unknown; overlap?: ScheduleOverlap; version?: number; client?: string; replace?: boolean },
  ): Promise<Schedule & { created: boolean }> {
    const body: Record<string, unknown> = { name, workflow: o.workflow, client: o.client ?? this.clientId, overlap: o.overlap ?? 'skip', replace: o.replace ?? false };
    for (const f of ['every', 'cron', 'timezone', 'input', 'version'] as const) if (o[f] !== undefined) body[f] = o[f];
    return this.request('schedule.create', body);
  }

  /** Every schedule, paused ones included, by name (operator role). */
  async listSchedules(): Promise<Schedule[]> {
    return this.request('schedule.list', {});
  }

  /** One schedule (operator role); UNKNOWN_SCHEDULE when there is none of that name. */
  async getSchedule(name: string): Promise<Schedule> {
    return this.request('schedule.get', { name });
  }

  /** Stops firing a schedule until it is resumed (operator role). */
  async pauseSchedule(name: string): Promise<Schedule> {
    return this.request('schedule.pause', { name });
  }

  /** Fires a paused schedule again from now on; the ticks of the paused period are not caught up (operator role). */
  async resumeSchedule(name: string): Promise<Schedule> {
    return this.request('schedule.resume', { name });
  }

  /** Removes a schedule (operator role). A task it already fired runs on. */
  async deleteSchedule(name: string): Promise<{ name: string; deleted: boolean }> {
    return this.request('schedule.delete', { name });
  }

  /** The current supervisor leader and every supervisor's last report. */
  async supervisorStatus(): Promise<SupervisorStatus> {
    return this.request('supervisor.status', {});
  }

  /**
   * Recent tasks, newest first (only this client's own once it reads its own: `taskReads`). A `status`
   * filter, or a client's own list, looks at the namespace's most recent max(20 × limit, 2000) tasks.
   */
  async listTasks(q: { status?: TaskStatus; limit?: number } = {}): Promise<TaskSummary[]> {
    return this.request('task.list', { ...(q.status ? { status: q.status } : {}), limit: q.limit ?? 100 });
  }

  /**
   * Tasks matching every filter given — `tags` (all of them), `status`, `workflow`, `client` (operators),
   * created in [`since`, `until`] — newest first, one page (≤ 1000) at a time: pass `next` back as
   * `cursor` for the next page; a page may be short, only an absent `next` means the end (decision 0021).
   * A query with a tag is answered from the search index, its cost following the matches.
   */
  async queryTasks(q: TaskQuery = {}): Promise<TaskQueryReply> {
    return this.request('task.query', q);
  }

  /** How many tasks match `queryTasks`' filters; `exact: false` when the count stopped at its budget (a lower bound). */
  async countTasks(q: TaskCountRequest = {}): Promise<TaskCountReply> {
    return this.request('task.count', q);
  }

  /** The bulk operations' API (operator role; decision 0021 §2), for runBulkOperation. */
  bulkApi(): BulkApi {
    return {
      start: (req) => this.request('bulk.start', req),
      query: (q) => this.queryTasks(q),
      apply: (opId, taskIds) => this.request('bulk.apply', { opId, taskIds }),
      checkpoint: (req) => this.request('bulk.checkpoint', req),
      end: (opId, state) => this.request('bulk.end', { opId, state }),
    };
  }

  /**
   * Cancels (running) or retries (failed) every task matching a filter, paced, acting on each task at
   * most once per operation even when run again after an interruption with the same `opId` (operator role).
   */
  async bulk(o: BulkRunOptions): Promise<BulkOp> {
    return runBulkOperation(this.bulkApi(), o);
  }

  /**
   * The submissions no scheduler has recorded yet (decision 0021 §3.4): how many wait in the SUBMIT stream
   * (a work queue: what is there is not yet recorded), when the oldest was stored, how many schedulers are
   * pulling, and how many were delivered and not yet acknowledged. Needs the JetStream API on the SUBMIT
   * stream (operators).
   */
  async submissionBacklog(): Promise<{ waiting: number; oldestAt?: number; pulling: number; inProgress: number }> {
    const n = this.bus.names;
    const [stream, consumer] = await Promise.all([this.bus.jsm.streams.info(n.streams.submit), this.bus.jsm.consumers.info(n.streams.submit, n.consumers.scheduler).catch(() => undefined)]);
    const first = stream.state.first_ts;
    const oldestAt = stream.state.messages > 0 && first ? Date.parse(first) : undefined;
    return { waiting: stream.state.messages, ...(oldestAt !== undefined && !Number.isNaN(oldestAt) ? { oldestAt } : {}), pulling: consumer?.num_waiting ?? 0, inProgress: consumer?.num_ack_pending ?? 0 };
  }

  /**
   * Asks the agent instances which of them holds each attempt (decision 0021 §3.3): one core-NATS probe per
   * attempt on `triad.<ns>.probe.<agent>`, answered only by the instance running it, on a reply subject under
   * `triad.<ns>.probed.<agent>.<nonce>.`. Waits at most `timeoutMs` for all of them (at most 20 are sent);
   * an attempt no instance answered for is `null`. Operators only (the probe subjects are theirs).
   */
  async probe(attempts: readonly (ProbeRequest & { agent: string })[], timeoutMs = 250): Promise<(ProbeReply | null)[]> {
    const s = this.bus.names.subjects;
    const sent = attempts.slice(0, MAX_PROBES);
    const answers: (ProbeReply | null)[] = attempts.map(() => null);
    if (sent.length === 0) return answers;
    const nonce = randomBytes(8).toString('hex');
    let left = sent.length;
    let done: () => void = () => undefined;
    const all = new Promise<void>((resolve) => (done = resolve));
    const sub = this.bus.nc.subscribe(s.probedOf(nonce), {
      callback: (err, msg) => {
        if (err) return;
        const i = Number(msg.subject.slice(msg.subject.lastIndexOf('.') + 1));
        const a = sent[i];
        if (!a || answers[i] !== null || !msg.subject.startsWith(s.probedPrefix(a.agent))) return;
        const d = decode(msg.data, ProbeReplySchema, 'probe reply');
        if (!d.ok || d.value.taskId !== a.taskId || d.value.step !== a.step || d.value.kind !== a.kind || d.value.attempt !== a.attempt) return;
        answers[i] = d.value;
        if (--left === 0) done();
      },
    });
    try {
      await this.bus.nc.flush();
      sent.forEach(({ agent, ...req }, i) => this.bus.nc.publish(s.probe(agent), encode(req), { reply: s.probed(agent, nonce, i) }));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
    } finally {
      sub.unsubscribe();
    }
    return answers;
  }

  /**
   * Per agent type, its durable on STEPS (operators): requests not yet delivered to any of its instances
   * (`pending`; with the messages waiting on its batch durable, a batch counted once), and pull requests waiting (`pulling`: instances asking for work). An agent type with no
   * durable yet (never connected) is absent.
   */
  async agentQueues(agents: readonly string[]): Promise<Record<string, { pending: number; pulling: number }>> {
    const n = this.bus.names;
    const out: Record<string, { pending: number; pulling: number }> = {};
    await Promise.all(
      [...new Set(agents)].map(async (a) => {
        const [c, b] = await Promise.all([
          this.bus.jsm.consumers.info(n.streams.steps, n.consumers.agent(a)).catch(() => undefined),
          // Requests sent in batches wait on the type's batch durable (decision 0023): a batch counts once.
          this.bus.jsm.consumers.info(n.streams.steps, n.consumers.agentBatch(a)).catch(() => undefined),
        ]);
        if (c) out[a] = { pending: c.num_pending + (b?.num_pending ?? 0), pulling: c.num_waiting };
      }),
    );
    return out;
  }

  /**
   * Unfinished tasks past their workflow's bound or with a deadline no supervisor acted on, latest first
   * (decision 0021 §3.7); a client identity: its own.
   */
  async stuckTasks(q: TaskStuckRequest = {}): Promise<TaskStuckReply> {
    return this.request('task.stuck', q);
  }

  /** One bulk operation's record (operator role). */
  async bulkOperation(opId: string): Promise<BulkOp> {
    return this.request('bulk.get', { opId });
  }

  /** Recent bulk operations, newest first (operator role). */
  async bulkOperations(limit = 20): Promise<BulkOp[]> {
    return this.request('bulk.list', { limit });
  }

  /**
   * Submits a task; resolves once JetStream has stored the submission (so it will not be lost).
   * The same task id submitted twice runs once.
   */
  async submit(workflow: string, input: unknown, o: SubmitOptions = {}): Promise<{ taskId: string; duplicate: boolean }> {
    const taskId = o.taskId ?? randomUUID();
    const candidate: Submission = {
      taskId,
      workflow,
      // Above the inline threshold, uploaded first and sent as a reference (decision 0021 §4.1).
      input: await offloadValue(input, 'input', this.inlineMaxBytes, (bytes) => this.uploadInput(taskId, bytes)),
      submittedAt: Date.now(),
      ...(o.version !== undefined ? { version: o.version } : {}),
      ...(o.replyTo ? { replyTo: o.replyTo } : {}),
      ...(o.priority !== undefined && o.priority !== DEFAULT_PRIORITY ? { priority: o.priority } : {}),
      ...(o.tags && Object.keys(o.tags).length > 0 ? { tags: o.tags } : {}),
    };
    const v = validate(candidate, SubmissionSchema, 'submission');
    if (!v.ok) throw v.error;
    const bytes = encode(v.value); // an oversized submission is refused here, before it is sent
    // The task's trace: a child of the caller's active span, or a new trace (decision 0013). Its
    // `traceparent` goes in the submission's headers; every actor's spans for the task descend from it.
    const attributes = { 'triad.namespace': this.namespace, 'triad.task_id': v.value.taskId, 'triad.workflow': workflow, 'triad.client': this.clientId };
    return inSpan(`triad.submit ${workflow}`, { kind: SpanKind.PRODUCER, attributes }, async (span) => {
      const r = await this.publishSubmission(v.value, bytes);
      span.setAttribute('triad.duplicate', r.duplicate);
      this.submittedLately.set(r.taskId, Date.now());
      if (this.submittedLately.size > SUBMITTED_LATELY_MAX) this.submittedLately.delete(this.submittedLately.keys().next().value ?? '');
      return r;
    });
  }

  private async publishSubmission(sub: Submission, bytes: Uint8Array): Promise<{ taskId: string; duplicate: boolean }> {
    const deadline = Date.now() + this.backlogWaitMs;
    // Deduplicated per client: another client's submission with the same task id must reach a
    // scheduler, to be refused there with the reason (decision 0010).
    // The reply subject goes in a header too: a refusal can then be answered even if the body is unreadable.
    const h = protocolHeaders(sub.replyTo ? { [REPLY_TO_HEADER]: sub.replyTo } : {});
    const once = async (): Promise<{ taskId: string; duplicate: boolean }> => {
      const ack = await publishRetrying(this.bus, this.bus.names.subjects.submit(this.clientId), bytes, { msgID: `${this.clientId}:${sub.taskId}`, headers: h });
      return { taskId: sub.taskId, duplicate: ack.duplicate };
    };
    try {
      if (this.waitingInLine === 0) {
        try {
          return await once();
        } catch (e) {
          if (!isBacklogFull(e)) throw e;
        }
      }
      return await this.inBacklogLine(once, deadline, sub.taskId);
    } catch (e) {
      if (e instanceof TriadError) throw e;
      throw this.refusal(e) ?? new TriadError(
        ErrorCode.Unavailable,
        `submission not stored (${errorMessage(e)}): is JetStream enabled and has a scheduler run in namespace "${this.namespace}" (it creates the streams)?`,
        { cause: e },
      );
    }
  }

  /**
   * While JetStream refuses this client's submissions because its backlog is full (decision 0022), they
   * wait in one line and only its head tries again, backing off — no herd of retries — until room comes
   * or `deadline` passes.
   */
  private async inBacklogLine<T>(publish: () => Promise<T>, deadline: number, taskId: string): Promise<T> {
    this.waitingInLine++;
    const turn = this.backlogLine.then(async () => {
      for (let delay = 25; ; delay = Math.min(delay * 2, 250)) {
        try {
          return await publish();
        } catch (e) {
          if (!isBacklogFull(e)) throw e;
          if (Date.now() + delay > deadline) {
            throw new TriadError(
              ErrorCode.Unavailable,
              `submission ${taskId} not stored: client ${this.clientId} already has as many submissions waiting in namespace "${this.namespace}" as it may (TRIAD_SUBMIT_BACKLOG_PER_CLIENT), and none was taken within ${this.backlogWaitMs} ms — the schedulers are behind, or a rate limit holds this client back (triad limits); submit again later`,
              { cause: e },
            );
          }
          await sleep(delay);
        }
      }
    });
    this.backlogLine = turn.catch(() => undefined);
    try {
      return await turn;
    } finally {
      this.waitingInLine--;
    }
  }

  /**
   * A task's events: its stored history first, then live ones, until the task ends (or `signal` aborts).
   * Events are de-duplicated by sequence number. They are read under the client that submitted the task
   * (decision 0010): `owner` when given, else the one `task.get` names (this client's own id for a task
   * not recorded yet).
   */
  async *watch(taskId: string, o: { signal?: AbortSignal; owner?: string } = {}): AsyncGenerator<TaskEvent> {
    const owner =
      o.owner ??
      (await this.getTask(taskId).then(
        (t) => t.client ?? this.clientId,
        () => this.clientId,
      ));
    if (o.signal?.aborted) return;
    // Live events first (subscribed before the history is read, so none falls between), then the stored
    // history through a scheduler: a client uses no JetStream consumer (decision 0022).
    const sub = this.bus.nc.subscribe(this.bus.names.subjects.event(owner, taskId));
    const stop = (): void => sub.unsubscribe();
    o.signal?.addEventListener('abort', stop, { once: true });
    const seen = new Set<number>();
    let last = 0;
    let from = 1;
    const history = async (): Promise<TaskEvent[]> => {
      const out: TaskEvent[] = [];
      for (;;) {
        const page = await this.taskEvents(taskId, { from, owner });
        out.push(...page.events);
        from = page.next;
        if (!page.more || o.signal?.aborted) return out;
      }
    };
    /** The events of `events` not yielded yet (a rejection, seq 0, each time), marked as seen. */
    const fresh = (events: readonly TaskEvent[]): TaskEvent[] => {
      const out = events.filter((ev) => ev.taskId === taskId && !(ev.seq > 0 && seen.has(ev.seq)));
      for (const ev of out) {
        seen.add(ev.seq);
        last = Math.max(last, ev.seq);
      }
      return out;
    };
    try {
      // The subscription is in place before the history is read (NATS restarting: it is sent again on
      // reconnect, and the history read below waits for NATS and a scheduler).
      await this.bus.nc.flush().catch(() => undefined);
      const live = sub[Symbol.asyncIterator]();
      let batch: TaskEvent[] = await this.untilAvailable(history, taskId, o.signal);
      for (;;) {
        for (const ev of fresh(batch)) {
          yield ev;
          if (await this.endsWatch(taskId, ev)) return;
        }
        const r = await live.next().catch((e: unknown) => {
          throw this.refusal(e) ?? e;
        });
        if (r.done) {
          // Ended by the abort or close — or by NATS refusing the subscription (not this client's events).
          const closed = await sub.closed;
          if (closed instanceof Error && !o.signal?.aborted) throw this.refusal(closed) ?? closed;
          return;
        }
        const d = decode(r.value.data, TaskEventBatchSchema, 'task events');
        if (!d.ok) continue;
        const first = Math.min(...d.value.events.filter((ev) => ev.seq > 0).map((ev) => ev.seq));
        // A gap (an event published just before the subscription, or dropped on a slow connection):
        // whatever is stored comes first.
        batch = first > last + 1 && Number.isFinite(first) ? [...(await history().catch(() => [])), ...d.value.events] : d.value.events;
        batch.sort((a, b) => a.seq - b.seq);
      }
    } finally {
      o.signal?.removeEventListener('abort', stop);
      sub.unsubscribe();
    }
  }

  /**
   * A rejection ends a watch; so does a task-ending event if it is the task's latest (an operator retry
   * can have brought the task back to life after it: its history then goes on).
   */
  private async endsWatch(taskId: string, ev: TaskEvent): Promise<boolean> {
    if (ev.type === 'rejected') return true;
    if (!isTaskEnd(ev)) return false;
    const state = await this.getTask(taskId).catch(() => undefined);
    return !state || state.seq <= ev.seq;
  }

  /**
   * Runs `read` until it works (NATS or the schedulers may be restarting) or `signal` aborts (without
   * one: for 30 s); a refusal is thrown at once.
   */
  private async untilAvailable<T>(read: () => Promise<T>, taskId: string, signal?: AbortSignal): Promise<T> {
    const deadline = signal ? Number.POSITIVE_INFINITY : Date.now() + 30_000;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
      try {
        return await read();
      } catch (e) {
        if (signal?.aborted || Date.now() + delay > deadline) throw e;
        const refused = this.refusal(e);
        if (refused) throw refused;
        if (e instanceof TriadError && e.code !== ErrorCode.Unavailable) throw e;
        if (!(e instanceof TriadError) && !isTransient(e)) {
          throw new TriadError(ErrorCode.Unavailable, `cannot read the events of task ${taskId} (${errorMessage(e)}): has a scheduler run in namespace "${this.namespace}"?`, { cause: e });
        }
        await sleep(delay, undefined, signal ? { signal } : {}).catch(() => undefined);
      }
    }
  }

  /**
   * A task's stored events, oldest first (only this client's own tasks once it reads its own:
   * `taskReads`), from stream sequence `from` (a previous page's `next`); `owner`: only those published
   * under that client (the task's submitter).
   */
  async taskEvents(taskId: string, o: { from?: number; owner?: string } = {}): Promise<TaskEventsPage> {
    return this.request('task.events', { taskId, ...(o.from !== undefined && o.from > 1 ? { from: o.from } : {}), ...(o.owner !== undefined ? { client: o.owner } : {}) });
  }

  /**
   * Waits until a task this client submitted (or `owner`'s) reaches a terminal state and returns its
   * final state; a submission the scheduler refused throws its reason.
   *
   * The events are followed as they come, and the task's state is read now and then besides (after
   * 1 s, then 2, 4, 5, 5… s later; two reads in a row that find it ended end the wait): events are
   * history the scheduler sends without waiting for JetStream's acknowledgement (decision 0008), so a
   * NATS failover can lose one — the task's end included — and the state in Redis is the truth.
   * Without those reads a waiter could wait forever for a task that has ended.
   */
  async wait(taskId: string, o: { timeoutMs?: number; onEvent?: (e: TaskEvent) => void; owner?: string } = {}): Promise<TaskState> {
    const timeoutMs = o.timeoutMs ?? 60_000;
    const timedOut = AbortSignal.timeout(timeoutMs);
    const watching = new AbortController();
    const stopWatching = (): void => watching.abort();
    timedOut.addEventListener('abort', stopWatching, { once: true });
    let ended: TaskState | undefined;
    const poll = (async () => {
      // A task seen ended once may still have its last events on the way: they get until the next read.
      let seenEnded = false;
      for (let delay = 1_000; !watching.signal.aborted; delay = Math.min(delay * 2, 5_000)) {
        // Ends early (rejecting, ignored) when the watch ends first.
        await sleep(delay, undefined, { signal: watching.signal }).catch(() => undefined);
        if (watching.signal.aborted) return;
        const state = await this.getTask(taskId).catch(() => undefined);
        const terminal = state !== undefined && isTerminal(state.status);
        if (terminal && seenEnded) {
          ended = state;
          watching.abort();
        }
        seenEnded = terminal;
      }
    })();
    try {
      for await (const ev of this.watch(taskId, { signal: watching.signal, owner: o.owner ?? this.clientId })) {
        o.onEvent?.(ev);
        if (ev.type === 'rejected') {
          throw ev.error ? TriadError.fromWire(ev.error) : new TriadError(ErrorCode.InvalidMessage, ev.reason ?? `task ${taskId} was rejected`);
        }
      }
    } finally {
      timedOut.removeEventListener('abort', stopWatching);
      watching.abort();
      await poll;
    }
    if (ended) return ended;
    if (timedOut.aborted) {
      throw new TriadError(ErrorCode.Timeout, `task ${taskId} did not finish within ${timeoutMs} ms; it may still finish: check with triad status ${taskId}`);
    }
    return this.getTask(taskId);
  }

  /**
   * Submits and waits, with the task's events on a private reply subject as they happen. The state's
   * object references (a large input or output) are resolved to their values unless `resolvePayloads`
   * is false (decision 0021, open question 2).
   */
  async run(workflow: string, input: unknown, o: SubmitOptions & { timeoutMs?: number; onEvent?: (e: TaskEvent) => void; resolvePayloads?: boolean } = {}): Promise<TaskState> {
    const { taskId } = await this.submit(workflow, input, o);
    const state = await this.wait(taskId, o);
    return o.resolvePayloads === false ? state : this.resolvePayloads(state);
  }

  /**
   * Uploads a task input's encoded bytes through a scheduler (the payload broker: a client's NATS account
   * has no JetStream, decision 0022), part by part, into this client's bucket; the reference to it.
   */
  async uploadInput(taskId: string, bytes: Uint8Array): Promise<ObjectRef> {
    if (bytes.length > this.maxObjectBytes) {
      throw new TriadError(ErrorCode.PayloadTooLarge, `the input is ${mib(bytes.length)}; at most ${mib(this.maxObjectBytes)} (TRIAD_MAX_OBJECT_BYTES)`);
    }
    const upload = nuid.next();
    const parts = Math.max(1, Math.ceil(bytes.length / OBJECT_CHUNK_BYTES));
    const sha256 = sha256Hex(bytes);
    for (let part = 0; part < parts; part++) {
      const data = bytes.subarray(part * OBJECT_CHUNK_BYTES, (part + 1) * OBJECT_CHUNK_BYTES);
      const last = part === parts - 1 ? { parts, size: bytes.length, sha256 } : undefined;
      const body = { taskId, upload, part, data, ...(last ? { last } : {}), ...(this.taskReads === 'all' ? { client: this.clientId } : {}) };
      // A part whose reply was lost is sent again: the scheduler stores it once (its message id).
      let r: { part: number; ref?: ObjectRef } | undefined;
      for (let tries = 0; r === undefined; tries++) {
        try {
          r = await this.request<{ part: number; ref?: ObjectRef }>('payload.put', body);
        } catch (e) {
          if (tries >= 2 || !(e instanceof TriadError && e.code === ErrorCode.Unavailable)) throw e;
        }
      }
      if (last) {
        if (!r.ref) throw new TriadError(ErrorCode.Internal, `the scheduler stored upload ${upload} but returned no reference`);
        return r.ref;
      }
    }
    throw new TriadError(ErrorCode.Internal, 'unreachable: an upload has at least one part');
  }

  /** The value an object reference points to (downloaded through a scheduler, checked against its size and SHA-256). */
  async download(ref: ObjectRef): Promise<unknown> {
    const bytes = await this.downloadBytes(ref);
    return unpackTrusted(bytes);
  }

  /** The msgpack bytes an object reference points to, checked. */
  async downloadBytes(ref: ObjectRef): Promise<Uint8Array> {
    if (ref.size > this.maxObjectBytes) {
      throw new TriadError(ErrorCode.PayloadTooLarge, `object ${ref.name} is ${mib(ref.size)}, above this client's TRIAD_MAX_OBJECT_BYTES (${mib(this.maxObjectBytes)})`);
    }
    return readObject(ref, (at) =>
      this.request<{ nuid: string; size: number; data: Uint8Array; next: number }>('payload.get', { bucket: ref.bucket, name: ref.name, ...(at ? { nuid: at.nuid, from: at.from } : {}) }),
    );
  }

  /** `value` (a task state, an output) with every object reference in it replaced by its value. */
  async resolvePayloads<T>(value: T): Promise<T> {
    return (await resolveRefs(value, (ref) => this.downloadBytes(ref))) as T;
  }

  /**
   * A private reply subject (in this client's inbox) and an iterator of the events the scheduler sends
   * there. Several tasks may share it: each event names its task. Its last token starts with `b~`, which
   * tells a scheduler that it reads event batches (decision 0025): the transitions of one scheduler turn
   * then come in one message.
   */
  replySubject(): { subject: string; events: AsyncIterable<TaskEvent>; close(): void } {
    const subject = `${this.bus.names.subjects.inboxPrefix(this.clientId)}.${EVENT_BATCH_REPLY_MARK}${nuid.next()}`;
    const sub: Subscription = this.bus.nc.subscribe(subject);
    async function* events(): AsyncGenerator<TaskEvent> {
      for await (const m of sub) {
        const d = decodeTaskEventMessage(m.data);
        if (!d.ok) continue;
        for (const b of d.value) if (b.ok) yield* b.value.events;
      }
    }
    return { subject, events: events(), close: () => sub.unsubscribe() };
  }
}

/** Errors worth retrying: the connection or JetStream is (re)starting. */
function isTransient(e: unknown): boolean {
  const name = e instanceof Error ? e.name : '';
  const msg = e instanceof Error ? e.message : String(e);
  return /Timeout|NoResponders|ConnectionError|Disconnect/i.test(name) || /timeout|no responders|503|disconnect|reconnect/i.test(msg);
}

/** The task-level terminal events (a step event can carry a status too, but never a terminal one). */
function isTaskEnd(ev: TaskEvent): boolean {
  return ['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled'].includes(ev.type);
}
