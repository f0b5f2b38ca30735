/**
 * Every message that crosses NATS, as zod schemas: protocol v1 (docs/protocol.md). The codec validates
 * with these at each boundary. Within v1 a reader ignores fields it does not know (objects are not
 * strict) and keeps validating the ones it does; an optional field may be absent or nil; a timestamp is
 * an integer of epoch milliseconds (a msgpack timestamp is read as one too).
 */
import { z } from 'zod';
import { TASK_ID_PATTERN, TASK_STATUSES, TERMINAL_TASK_STATUSES, isTerminal, tagProblems } from './constants.js';
import { ClientIdSchema, NameSchema, TaskIdSchema } from './names.js';
import { MAX_FOREACH_ITEMS } from './definition.js';

/** An optional field: absent, or nil (read as absent), else valid by `schema`. */
export function optional<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null ? undefined : v), schema.optional());
}

/**
 * A value a newer writer added to an enum this reader does not know (protocol §9: enums may gain values
 * within v1). It is kept as the string it is and shown as is; `(string & {})` keeps the known values'
 * completion in editors.
 */
export type Unrecognized = string & {};

/**
 * An enum as a reader reads it: a known value, or any other short string kept as is — so a batch of
 * events with a new type, or a task with a step in a new status, is not refused whole. Writers use the
 * strict enum.
 */
export function tolerant<T extends string>(known: z.ZodType<T, T>): z.ZodType<T | Unrecognized, T | Unrecognized> {
  return z.union([known, z.string().min(1).max(100)]);
}

/** Epoch milliseconds, an integer; a msgpack timestamp (a Date once decoded) is read as its milliseconds. */
const epochMs = z.preprocess((v) => (v instanceof Date ? v.getTime() : v), z.number().int().nonnegative());
/** A NATS subject a client owns (its private reply subject). No wildcards. */
const SubjectSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[^\s*>]+$/, 'a reply subject must not contain spaces or wildcards (* >)');

export const WireErrorSchema = z.object({
  code: z.string(),
  message: z.string(),
  details: optional(z.array(z.string())),
});

/** A task's priority: 1 (highest) … 5 (lowest), 3 when not given (decision 0020 §1.4). */
export const DEFAULT_PRIORITY = 3;
const priorityError = { error: (issue: { input?: unknown }) => `expected a whole number from 1 (highest) to 5 (lowest), got ${JSON.stringify(issue.input)}` };
export const PrioritySchema = z.number(priorityError).int(priorityError).min(1, priorityError).max(5, priorityError);
/**
 * Search attributes (decision 0021 §1): string → string, at most 16, key `^[A-Za-z][A-Za-z0-9_.-]{0,31}$`,
 * value 1–128 bytes of UTF-8 without control characters; keys under `triad.` are Triad's. Fixed at
 * submission; matched exactly, byte for byte.
 */
export const TagsSchema = z.record(z.string(), z.string()).superRefine((tags, ctx) => {
  for (const problem of tagProblems(tags)) {
    // Each problem at the field it is about (`tags.customer: …`), so the verdict names that field.
    const at = /^tags\.([^:\s]+): (.*)$/s.exec(problem);
    if (at?.[1] !== undefined && at[2] !== undefined) ctx.addIssue({ code: 'custom', path: [at[1]], message: at[2] });
    else ctx.addIssue({ code: 'custom', message: problem });
  }
});
export type Tags = z.output<typeof TagsSchema>;
/** Tags as they are read back (a task's, possibly with Triad's own `triad.` keys). */
const StoredTagsSchema = z.record(z.string(), z.string());

export const SubmissionSchema = z
  .object({
    taskId: TaskIdSchema,
    workflow: NameSchema,
    /** Pin a version; the latest registered version when absent. */
    version: optional(z.number().int().min(1)),
    // Optional: the codec drops undefined values, so an absent input must decode as absent.
    input: optional(z.unknown()),
    replyTo: optional(SubjectSchema),
    submittedAt: epochMs,
    /**
     * 1 (highest) … 5 (lowest); absent = 3. Orders the steps that wait for a dispatch limit of their agent
     * type (decision 0020); until those limits are built it is stored and shown, and changes nothing.
     */
    priority: optional(PrioritySchema),
    /** Search attributes (decision 0021): `triad list --tag k=v` finds the task by them. */
    tags: optional(TagsSchema),
  });
export type Submission = z.output<typeof SubmissionSchema>;

export const StepKindSchema = z.enum(['run', 'compensate']);
export type StepKind = z.output<typeof StepKindSchema>;

export const StepRequestSchema = z
  .object({
    taskId: TaskIdSchema,
    workflow: NameSchema,
    version: z.number().int().min(1),
    step: NameSchema,
    agent: NameSchema,
    kind: StepKindSchema,
    /** Grows by one each time the step is started again; the fencing value for its result. */
    attempt: z.number().int().min(1),
    /** Stable across attempts: the remote service applies an effect once per key. */
    idempotencyKey: z.string().min(1).max(512),
    /** For a compensation: the idempotency key of the effect it undoes (the step's run key). */
    undoes: optional(z.string().min(1).max(512)),
    /**
     * For a compensation: whether the run's effect is known to have happened ('applied': the run
     * completed) or may have ('unknown': it timed out, its agent died, or it was in flight when the undo
     * began). An undo of an effect that never happened must succeed and leave a tombstone (decision 0009).
     */
    effect: optional(z.enum(['applied', 'unknown'])),
    /** Absolute deadline (epoch ms). Past it the agent stops and sends nothing back. */
    completeBy: epochMs,
    // Optional: the codec drops undefined values, so an absent input must decode as absent.
    input: optional(z.unknown()),
    /** Outputs of the steps this step declared it needs, by step name. */
    needs: z.record(z.string(), z.unknown()),
    retry: optional(z.object({ maxAttempts: z.number().int().min(1), initialDelayMs: z.number().int().min(1), maxDelayMs: z.number().int().min(1) })),
    dispatchedAt: epochMs,
    /**
     * A fan-out step (`forEach`, decision 0019 §4) runs once per element of a list: this request is for
     * element `index` (0-based) of `count`, whose value is `value` (`input` stays the task input). The
     * agent must echo `index` as its result's `item` (and put `#<index>` in the result's message id).
     */
    item: optional(z.object({ index: z.number().int().min(0).max(MAX_FOREACH_ITEMS - 1), count: z.number().int().min(1).max(MAX_FOREACH_ITEMS), value: optional(z.unknown()) })),
    /**
     * The object store bucket of the task's client (decision 0021 §4.3): an output whose encoding is above
     * the inline threshold is stored there, under `<taskId>/<step>[#<i>]/<kind>/<attempt>/<nuid>`, and the
     * result carries the reference (docs/protocol.md §12). `input`, `needs` values and `item.value` may be
     * references too: an agent resolves them before its handler runs.
     */
    bucket: optional(z.string().max(120)),
  });
export type StepRequest = z.output<typeof StepRequestSchema>;

/**
 * A probe (decision 0021 §3.3): "which instance holds this attempt?", sent on `triad.<ns>.probe.<agent>`
 * (core NATS) to every instance of the agent type, with a reply subject under
 * `triad.<ns>.probed.<agent>.`. Only the instance running that attempt answers; the others stay silent.
 */
export const ProbeRequestSchema = z.object({
  taskId: TaskIdSchema,
  step: NameSchema,
  kind: StepKindSchema,
  attempt: z.number().int().min(1),
  /** A fan-out element's index. */
  item: optional(z.number().int().min(0).max(MAX_FOREACH_ITEMS - 1)),
});
export type ProbeRequest = z.output<typeof ProbeRequestSchema>;

/** The answer of the agent instance holding a probed attempt. */
export const ProbeReplySchema = ProbeRequestSchema.extend({
  agentId: z.string().min(1).max(200),
  /** When it took the request (epoch ms). */
  since: epochMs,
  /** Its current call of the handler: 1, 2 … (its in-process retries). */
  try: z.number().int().min(0),
  /** calling its handler, backing off between tries, or sending the result. */
  state: tolerant(z.enum(['calling', 'backing_off', 'sending'])),
  /** While backing off: when the next try starts (epoch ms). */
  nextTryAt: optional(epochMs),
});
export type ProbeReply = z.output<typeof ProbeReplySchema>;

const resultBase = {
  taskId: TaskIdSchema,
  step: NameSchema,
  kind: StepKindSchema,
  attempt: z.number().int().min(1),
  agentId: z.string().min(1).max(200),
  finishedAt: epochMs,
  /** Handler calls made inside the window (agent-side retries included); 0 when none was made (an open breaker, invalid input). */
  tries: z.number().int().min(0),
  /** For a fan-out element: the request's `item.index`, echoed (a fan-out step's result without it is refused as stale). */
  item: optional(z.number().int().min(0).max(MAX_FOREACH_ITEMS - 1)),
};
export const StepResultSchema = z.discriminatedUnion('ok', [
  // output is optional: a handler that returns nothing (void) sends no output key.
  z.object({ ...resultBase, ok: z.literal(true), output: optional(z.unknown()) }),
  z
    .object({
      ...resultBase,
      ok: z.literal(false),
      error: z.object({
        message: z.string().max(4000),
        retryable: z.boolean(),
        name: optional(z.string().max(200)),
        /** The agent's circuit breaker for this service is open: the step was not attempted. */
        circuitOpen: optional(z.boolean()),
        /**
         * The service refused the call and asked for time (HTTP 429, or 503 with Retry-After): the step is
         * put back without counting a failure, after retryAfterMs (1 s when absent; decision 0020 §5).
         */
        throttled: optional(z.boolean()),
        /** With circuitOpen: when the breaker lets a trial call through again; with throttled: the service's Retry-After. */
        retryAfterMs: optional(z.number().int().min(0).max(86_400_000)),
        /**
         * What the agent knows of the remote effect: 'none' when no try of this attempt can have taken
         * effect (each failed before reaching the service, or was refused without effect); otherwise
         * 'unknown'. Absent: 'none' if tries is 0, else 'unknown' (decision 0009).
         */
        effect: optional(z.enum(['none', 'unknown'])),
      }),
    }),
]);
export type StepResult = z.output<typeof StepResultSchema>;

export const TaskStatusSchema = z.enum(TASK_STATUSES);
export type TaskStatus = z.output<typeof TaskStatusSchema>;
export { TERMINAL_TASK_STATUSES, isTerminal };

export const StepStatusSchema = z.enum([
  'pending',
  'processing',
  'processed',
  'failed',
  'parked',
  'error',
  /**
   * Stopped without completing: parked or failed when its task began to be undone, or in flight then and
   * ended without success, or stopped when its task failed. Compensated if its effect may have happened.
   */
  'abandoned',
  'compensating',
  'compensated',
  'compensation_failed',
  /** Its `when` was false when it became ready (decision 0019): done, with no output and no effect; `reason` says why. */
  'skipped',
  /** A durable sleep waits for its time (`until`); no agent takes part (decision 0019). */
  'sleeping',
  /** A waitFor step waits for its signal until `until` (decision 0019). */
  'waiting',
  /** Waits for a permit of its agent type's dispatch limit (decision 0020); its attempt has not started. */
  'queued',
]);
export type StepStatus = z.output<typeof StepStatusSchema>;

export const TaskEventTypeSchema = z.enum([
  'received',
  'rejected',
  'step_started',
  'step_done',
  'step_failed',
  'step_retried',
  'step_parked',
  'step_error',
  'step_abandoned',
  /** A step's `when` was false: it is skipped, `reason` says why (decision 0019). */
  'step_skipped',
  /** A sleep step began to sleep until `until` (decision 0019). */
  'step_sleeping',
  /** A waitFor step began to wait for `signal` until `until` (decision 0019). */
  'step_waiting',
  /** A signal was accepted: delivered to `step`, or kept until a step waits for it (`reason` says which). */
  'signal_received',
  /** A step waits for a dispatch limit of its agent type (decision 0020): `reason` says which, key and priority. */
  'step_queued',
  'completed',
  'failed',
  'compensating',
  'compensation_started',
  'compensation_done',
  'compensated',
  'compensation_failed',
  'cancelled',
]);
export type TaskEventType = z.output<typeof TaskEventTypeSchema>;

export const TaskEventSchema = z
  .object({
    taskId: z.string().min(1).max(128),
    /** Per-task sequence number, assigned atomically with the transition: events sort by it. */
    seq: z.number().int().nonnegative(),
    /** A type this reader does not know is kept as is (tolerant): informational, never an end (protocol §9). */
    type: tolerant(TaskEventTypeSchema),
    status: optional(tolerant(TaskStatusSchema)),
    step: optional(NameSchema),
    attempt: optional(z.number().int().min(1)),
    at: epochMs,
    /** Why (an error message, a rejection reason). */
    reason: optional(z.string().max(4000)),
    error: optional(WireErrorSchema),
    /** What a waiting step waits until (epoch ms): a sleep's wake time, a wait's timeout (decision 0019). */
    until: optional(epochMs),
    /** The signal a step waits for, or that was received (decision 0019). */
    signal: optional(NameSchema),
    /** The fan-out element (its index) the event is about (decision 0019 §4). */
    item: optional(z.number().int().min(0)),
  });
export type TaskEvent = z.output<typeof TaskEventSchema>;

/**
 * What travels on a task's event subject and its submitter's reply subject: the events of one
 * transition, in sequence order (one message per transition, not per event).
 */
export const TaskEventBatchSchema = z
  .object({
    taskId: z.string().min(1).max(128),
    events: z.array(TaskEventSchema).min(1).max(1_000),
  });
export type TaskEventBatch = z.output<typeof TaskEventBatchSchema>;

/**
 * Supervisor → scheduler: "send the request of this step attempt" (a retry, or a compensation the
 * supervisor's transition began). The transition is already made; the scheduler only publishes, and only
 * if that attempt is still the current one. `epoch` is the supervisor leader's fencing value.
 */
export const SupervisorCommandSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('retry_step'),
    taskId: TaskIdSchema,
    step: NameSchema,
    kind: StepKindSchema,
    attempt: z.number().int().min(1),
    epoch: z.number().int().nonnegative(),
    /** The fan-out element whose attempt this is (decision 0019 §4). */
    item: optional(z.number().int().min(0).max(MAX_FOREACH_ITEMS - 1)),
  }),
  /**
   * A supervisor transition queued a phase for a dispatch limit (a retry, a park's end, the undo's next
   * compensation, or a check, decision 0020 §2.5): the scheduler hands the ticket to the limiter if the
   * phase still waits with it.
   */
  z.object({
    type: z.literal('queue_step'),
    taskId: TaskIdSchema,
    step: NameSchema,
    kind: StepKindSchema,
    ticket: z.string().min(1).max(600),
    epoch: z.number().int().nonnegative(),
  }),
  /** A limiter's wake time passed with no scheduler's timer to act on it (decision 0020 §2.5): run its grant loop. */
  z.object({
    type: z.literal('pump_limit'),
    agent: NameSchema,
    epoch: z.number().int().nonnegative(),
  }),
]);
export type SupervisorCommand = z.output<typeof SupervisorCommandSchema>;

export const AlertSchema = z
  .object({
    id: z.string().min(1),
    /** step_error: a step's ladder ran out; step_failed: it failed permanently; task_deadline: the task's deadline passed. */
    kind: z.enum(['step_error', 'step_failed', 'compensation_failed', 'task_deadline']),
    taskId: z.string(),
    step: optional(z.string()),
    /** The fan-out element that gave up (its index; decision 0019 §4). */
    item: optional(z.number().int().min(0)),
    failureCount: z.number().int().nonnegative(),
    lastError: optional(z.string().max(4000)),
    raisedAt: epochMs,
  });
export type Alert = z.output<typeof AlertSchema>;

/** What each supervisor reports after every sweep (health subject, and `triad supervisor`). */
export const SupervisorHealthSchema = z.object({
  supervisorId: z.string(),
  leading: z.boolean(),
  leader: optional(z.string()),
  epoch: z.number().int().nonnegative(),
  lastSweepAt: optional(z.number()),
  sweepMs: optional(z.number()),
  handled: z.number().int().nonnegative(),
  /** Steps past completeBy still waiting to be handled at the end of the last sweep. */
  expiredWaiting: z.number().int().nonnegative(),
  retries: z.number().int().nonnegative(),
  parked: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  /** Tasks whose undo the ladder began (workflows with onFailure: compensate). */
  undos: z.number().int().nonnegative(),
  /** Steps in flight when their task began to be undone whose complete-by passed (abandoned, compensated if in doubt). */
  abandoned: z.number().int().nonnegative().default(0),
  /** Alerts published from the outbox the transitions record them in. */
  alertsPublished: z.number().int().nonnegative().default(0),
  /** Finished tasks removed by retention. */
  purged: z.number().int().nonnegative(),
  /** Finished tasks whose record retention compacted (absent from reports of older supervisors). */
  compacted: z.number().int().nonnegative().default(0),
  /** Writes rejected because a newer leader epoch exists. */
  fencedWrites: z.number().int().nonnegative(),
  /** Queued phases whose check re-sent their ticket to a scheduler (`queue_step` commands; decision 0020 §2.6). */
  queueChecks: z.number().int().nonnegative().default(0),
  /** Limiters whose wake time passed with no scheduler pumping them (`pump_limit` commands; decision 0020 §2.5). */
  limitWakes: z.number().int().nonnegative().default(0),
  /** What this supervisor runs beyond protocol 1: `limits1` (decision 0020); absent from older supervisors' reports. */
  features: optional(z.array(z.string())),
});
export type SupervisorHealth = z.output<typeof SupervisorHealthSchema>;

export const DeadLetterSchema = z
  .object({
    source: z.string(),
    reason: z.string(),
    receivedAt: epochMs,
    deliveries: z.number().int().nonnegative(),
    original: z.instanceof(Uint8Array),
    /** The subject the original arrived on: where `triad dlq replay` re-publishes it (absent from older writers). */
    subject: optional(z.string()),
    /** The original's NATS headers (the first value of each), re-sent on a replay but for Nats-Msg-Id. */
    headers: optional(z.record(z.string(), z.string())),
  });
export type DeadLetter = z.output<typeof DeadLetterSchema>;

// ---- request/reply API (client → schedulers) ----

export const RegisterWorkflowRequestSchema = z.object({ definition: z.unknown() });
export const GetWorkflowRequestSchema = z.object({ name: NameSchema, version: optional(z.number().int().min(1)) });
export const ListWorkflowsRequestSchema = z.object({});
export const GetTaskRequestSchema = z.object({ taskId: TaskIdSchema });
export const CancelTaskRequestSchema = z.object({ taskId: TaskIdSchema, reason: optional(z.string().max(1000)) });
export const RetryTaskRequestSchema = z
  .object({ taskId: TaskIdSchema, step: optional(NameSchema), input: optional(z.unknown()), replaceInput: z.boolean().default(false) });
export const EmptyRequestSchema = z.object({});

/** The most a signal's data may take, msgpack-encoded (decision 0019 §3.1): 16 buffered per task = 1 MB. */
export const MAX_SIGNAL_DATA_BYTES = 65_536;

/**
 * A signal for a task (decision 0019 §3): `name` as a waitFor step names it; `signalId`, chosen by the
 * sender, makes a repeat harmless; `data` becomes the waiting step's output.
 */
export const SignalRequestSchema = z.object({
  taskId: TaskIdSchema,
  name: NameSchema,
  signalId: z.string().regex(TASK_ID_PATTERN, 'a signal id is 1-128 characters of A-Z a-z 0-9 _ : -'),
  data: optional(z.unknown()),
});
export type SignalRequest = z.output<typeof SignalRequestSchema>;
/** delivered: a waiting step got it; buffered: kept until a step of that name waits; duplicate: that id was accepted before. */
export const SignalReplySchema = z.object({
  taskId: z.string(),
  name: z.string(),
  signalId: z.string(),
  outcome: tolerant(z.enum(['delivered', 'buffered', 'duplicate'])),
  /** The step that consumed it (delivered, or a duplicate of a delivered one). */
  step: optional(z.string()),
});
export type SignalReply = z.output<typeof SignalReplySchema>;

export const ListTasksRequestSchema = z
  .object({ status: optional(TaskStatusSchema), limit: z.number().int().min(1).max(10_000).default(100) });

/**
 * `task.events`: a task's stored events from the EVENTS stream, oldest first; `from` is the `next` of a
 * previous reply (a stream sequence), to read on where it stopped; `client`, on the namespace-wide
 * subject, only the events published under that client (the task's owner: another client's rejected
 * submission of the same id is not its story). A client-scoped request reads its own client's always
 * (decision 0022).
 */
export const TaskEventsRequestSchema = z.object({ taskId: TaskIdSchema, from: optional(z.number().int().min(1)), client: optional(ClientIdSchema) });

/** Whom a submission rate limit applies to: one client id, or `*` for every client without its own. */
export const LimitTargetSchema = z.union([ClientIdSchema, z.literal('*')]);
/** `intake.set`: at most `ratePerSecond` submissions a second on average, `burst` at once (default: the rate, at least 1). */
export const SetLimitRequestSchema = z.object({
  client: LimitTargetSchema,
  ratePerSecond: z.number().min(0.001, 'a rate is at least 0.001 submissions a second').max(100_000, 'a rate is at most 100000 submissions a second'),
  burst: optional(z.number().int().min(1).max(100_000)),
});
export const ClearLimitRequestSchema = z.object({ client: LimitTargetSchema });
/** A stored per-client submission rate limit. */
export const ClientLimitSchema = z.object({ client: LimitTargetSchema, ratePerSecond: z.number().positive(), burst: z.number().int().min(1), setAt: epochMs });
export type ClientLimit = z.output<typeof ClientLimitSchema>;

/** A phase waiting for a dispatch limit (decision 0020 §6): for what, since when, and why (a limit, or a throttle's pause). */
export const StepQueueSchema = z.object({
  agent: z.string(),
  /** Its key value ('' = none). */
  key: optional(z.string()),
  priority: z.number().int(),
  /** When this wait began, and when its first wait began (a throttle's re-queue keeps its place). */
  since: z.number(),
  firstAt: z.number(),
  why: tolerant(z.enum(['limit', 'throttled'])),
  /**
   * Its place in line as `task.get` read it from the limiter (decision 0020 §6): the grants before it if
   * nothing else arrived — exact, or with `placeApprox` an upper bound. Absent when the limiter did not
   * answer, or the phase was granted and is starting (`granted`).
   */
  place: optional(z.number().int().positive()),
  placeApprox: optional(z.boolean()),
  /** Its level in line (1 … 5: its priority, improved by one every 30 s it waits). */
  level: optional(z.number().int()),
  /** Granted a permit, being started. */
  granted: optional(z.boolean()),
  /** Its agent type (or its key) is paused by a service's Retry-After until then (epoch ms). */
  pausedUntil: optional(z.number()),
  /** Its key is held back until then (epoch ms) by its per-key rate, or (`concurrency`) until one of its permits ends. */
  blockedUntil: optional(z.union([z.number(), z.literal('concurrency')])),
});

/** The state of one step as reported to clients. */
export const StepStateSchema = z.object({
  name: z.string(),
  /** What the step does (decision 0019): absent or `agent` = calls an agent (`agent` names it); `sleep`, `signal` (waitFor), `child`. */
  kind: optional(tolerant(z.enum(['agent', 'sleep', 'signal', 'child']))),
  agent: z.string(),
  status: tolerant(StepStatusSchema),
  attempt: z.number().int().nonnegative(),
  lockedBy: optional(z.string()),
  completeBy: optional(z.number()),
  failureCount: z.number().int().nonnegative(),
  startedAt: optional(z.number()),
  finishedAt: optional(z.number()),
  output: optional(z.unknown()),
  error: optional(z.string()),
  /** Why a skipped step was skipped (its condition, as it evaluated: "amount 10 is not > 1000"). */
  reason: optional(z.string()),
  /** What a waiting step waits until (epoch ms): a sleeping step's wake time, a waiting step's timeout. */
  until: optional(z.number()),
  /** The signal a waitFor step waits for; `signalId`: the one it consumed. */
  signal: optional(z.string()),
  signalId: optional(z.string()),
  /**
   * A child step's child task (decision 0019 §7): its id, its workflow (and pinned version), and the
   * operation the step last asked of it (`start`, `cancel` or `undo`); `ended`: how the child ended, once
   * the parent heard of it.
   */
  child: optional(
    z.object({
      taskId: z.string(),
      workflow: z.string(),
      version: optional(z.number().int()),
      op: tolerant(z.enum(['start', 'cancel', 'undo'])),
      ended: optional(z.string()),
    }),
  ),
  /** A fan-out step's elements (decision 0019 §7): how many, and how many are pending, running (started, not ended), done (processed) and failed (failed or given up). */
  items: optional(
    z.object({
      count: z.number().int().nonnegative(),
      pending: z.number().int().nonnegative(),
      running: z.number().int().nonnegative(),
      done: z.number().int().nonnegative(),
      failed: z.number().int().nonnegative(),
    }),
  ),
  dependsOn: z.array(z.string()),
  /** The step's completion order (compensations run in its reverse). */
  order: optional(z.number().int()),
  /** Attempts its agent's open circuit breaker refused (they count as failures only past maxCircuitOpen). */
  circuitCount: optional(z.number().int().nonnegative()),
  /** When the step gives up whatever its ladder says (epoch ms; set on its first start). */
  giveUpAt: optional(z.number()),
  /** A parked step: parked by its agent's open circuit breaker, or by the ladder's long back-off (decision 0021 §3.2). */
  parkedFor: optional(tolerant(z.enum(['breaker', 'backoff']))),
  /** What is known of its remote effect: none, unknown (may have happened), applied (decision 0009). */
  effect: optional(z.enum(['none', 'unknown', 'applied'])),
  /** A run waiting for its agent type's dispatch limit (status `queued`, decision 0020 §6). */
  queue: optional(StepQueueSchema),
  /** Time its run has waited for dispatch limits, over every start (ms). */
  waitedMs: optional(z.number().nonnegative()),
  /** Its compensation, once one has started. */
  compensation: optional(
    z.object({
      agent: z.string(),
      attempt: z.number().int(),
      failureCount: z.number().int(),
      completeBy: optional(z.number()),
      lockedBy: optional(z.string()),
      startedAt: optional(z.number()),
      finishedAt: optional(z.number()),
      error: optional(z.string()),
      parked: optional(z.boolean()),
      parkedFor: optional(tolerant(z.enum(['breaker', 'backoff']))),
      circuitCount: optional(z.number().int().nonnegative()),
      giveUpAt: optional(z.number()),
      /** The compensation waits for its agent type's dispatch limit (decision 0020). */
      queue: optional(StepQueueSchema),
    }),
  ),
});
export type StepState = z.output<typeof StepStateSchema>;

export const TaskStateSchema = z.object({
  taskId: z.string(),
  workflow: z.string(),
  version: z.number().int(),
  status: tolerant(TaskStatusSchema),
  input: optional(z.unknown()),
  lockedBy: optional(z.string()),
  lockEpoch: z.number().int().nonnegative(),
  /** The sequence number of the task's latest event. */
  seq: z.number().int().nonnegative(),
  createdAt: z.number(),
  updatedAt: z.number(),
  finishedAt: optional(z.number()),
  /** The task's own deadline (epoch ms), when its workflow sets deadlineMs. */
  deadlineAt: optional(z.number()),
  /** The client that submitted it: its events are under `triad.<ns>.event.<client>.<taskId>` (decision 0010). */
  client: optional(z.string()),
  /** The submission's priority when not the default 3 (1 highest … 5 lowest; decision 0020). */
  priority: optional(z.number().int()),
  error: optional(z.string()),
  steps: z.array(StepStateSchema),
  /**
   * The record was compacted by retention (decision 0007): lockedBy, lockEpoch (reported as 0), the
   * steps' completeBy and lockedBy, and a completed task's input are no longer kept; updatedAt is finishedAt.
   */
  compacted: optional(z.boolean()),
  /** Signals accepted and kept until a step waits for them, oldest first (decision 0019 §3.3). */
  signals: optional(z.array(z.object({ name: z.string(), signalId: z.string(), at: z.number(), by: z.string() }))),
  /** A child task's parent (decision 0019 §5.1): the task and the step that started it. */
  parent: optional(z.object({ taskId: z.string(), step: z.string() })),
  /** A child task's output, once it completed: the map of its last steps' outputs (decision 0019 §5.5). */
  output: optional(z.unknown()),
  /** Its search attributes (decision 0021), as submitted. */
  tags: optional(StoredTagsSchema),
  /**
   * A running task that has not started (decision 0024): `waiting` while its client has as many active tasks
   * as its cap allows, `admitted` once one of them ended and before its steps start.
   */
  admission: optional(tolerant(z.enum(['waiting', 'admitted']))),
});
export type TaskState = z.output<typeof TaskStateSchema>;

export const TaskSummarySchema = z.object({
  taskId: z.string(),
  workflow: z.string(),
  version: z.number().int(),
  status: tolerant(TaskStatusSchema),
  createdAt: z.number(),
  updatedAt: z.number(),
  /** Its search attributes (decision 0021); `task.query` fills them, `task.list` does not. */
  tags: optional(StoredTagsSchema),
  /** The client that submitted it (`task.query`). */
  client: optional(z.string()),
});
export type TaskSummary = z.output<typeof TaskSummarySchema>;

/**
 * `task.query` (decision 0021 §1.3): tasks newest first (createdAt, then task id, descending) that have
 * every tag of `tags` and the given status, workflow and client, created in [since, until]. `cursor` is the
 * `next` of the previous page of the same query. A short page does not mean the end: only an absent `next` does.
 */
export const TaskQuerySchema = z.object({
  tags: optional(TagsSchema),
  status: optional(TaskStatusSchema),
  workflow: optional(NameSchema),
  /** Operators only: a client-scoped subject sets it to its own client. */
  client: optional(ClientIdSchema),
  /** createdAt ≥ since (epoch ms). */
  since: optional(epochMs),
  /** createdAt ≤ until (epoch ms). */
  until: optional(epochMs),
  limit: z.number().int().min(1).max(1000).default(50),
  cursor: optional(z.string().min(1).max(400)),
});
export type TaskQuery = z.input<typeof TaskQuerySchema>;
export const TaskQueryReplySchema = z.object({
  tasks: z.array(TaskSummarySchema),
  /** Where the next page starts; absent once every match was returned. */
  next: optional(z.string()),
  /** Index entries the query read (its cost; decision 0021 §6). */
  scanned: z.number().int().nonnegative(),
});
export type TaskQueryReply = z.output<typeof TaskQueryReplySchema>;
/**
 * `task.stuck` (decision 0021 §3.7): unfinished tasks past their workflow's bound, or with a deadline no
 * supervisor acted on, latest first. `scan`: index entries read per bucket at most (the reply says whether
 * that was enough: `complete`).
 */
export const TaskStuckRequestSchema = z.object({
  workflow: optional(NameSchema),
  tags: optional(TagsSchema),
  /** Operators only: a client-scoped subject sets it to its own client. */
  client: optional(ClientIdSchema),
  limit: z.number().int().min(1).max(200).default(50),
  scan: z.number().int().min(1).max(10_000).default(2_000),
});
export type TaskStuckRequest = z.input<typeof TaskStuckRequestSchema>;
export const StuckTaskSchema = z.object({
  summary: TaskSummarySchema,
  /** bound: created longer ago than its workflow's bound; overdue: a deadline passed and no supervisor acted on it; both. */
  why: tolerant(z.enum(['bound', 'overdue', 'both'])),
  /** createdAt + its workflow's bound (absent when that bound cannot be computed). */
  boundAt: optional(z.number()),
  /** The earliest passed deadline no supervisor acted on. */
  overdueSince: optional(z.number()),
  /** How late it is (ms): past its bound, or past that deadline, whichever is longer. */
  lateMs: z.number().nonnegative(),
  /** Its last transition (updatedAt). */
  lastProgressAt: z.number(),
});
export type StuckTask = z.output<typeof StuckTaskSchema>;
export const TaskStuckReplySchema = z.object({
  tasks: z.array(StuckTaskSchema),
  /** Index entries read. */
  scanned: z.number().int().nonnegative(),
  /** False when a bucket held more candidates than `scan`: some stuck tasks may be missing; ask with a larger scan. */
  complete: z.boolean(),
});
export type TaskStuckReply = z.output<typeof TaskStuckReplySchema>;
/** `task.count`: the filters of `task.query`. */
export const TaskCountRequestSchema = TaskQuerySchema.omit({ limit: true, cursor: true });
export type TaskCountRequest = z.input<typeof TaskCountRequestSchema>;
/** `exact: false`: the count stopped at its read budget and is a lower bound. */
export const TaskCountReplySchema = z.object({ count: z.number().int().nonnegative(), exact: z.boolean(), scanned: z.number().int().nonnegative() });
export type TaskCountReply = z.output<typeof TaskCountReplySchema>;

/** What a bulk operation does (decision 0021 §2): cancel running tasks, or retry failed ones. */
export const BulkActionSchema = z.enum(['cancel', 'retry']);
export type BulkAction = z.output<typeof BulkActionSchema>;
/** The tasks a bulk operation may act on: `task.count`'s filters but `until` (the operation's snapshot sets it). */
export const BulkFilterSchema = TaskCountRequestSchema.omit({ until: true });
export type BulkFilter = z.output<typeof BulkFilterSchema>;
/** `bulk.start`: a new operation, or the one `opId` names again with the same action and filter (a resume). */
export const BulkStartRequestSchema = z.object({
  opId: optional(NameSchema),
  action: BulkActionSchema,
  filter: BulkFilterSchema,
  /** retry: the step to retry (default: each task's failed one). */
  step: optional(NameSchema),
  /** cancel: the reason recorded on each task. */
  reason: optional(z.string().max(400)),
}).superRefine((q, ctx) => {
  // What a bulk operation may act on, at the boundary (the scheduler checks it again): named tasks only, in the status its action applies to.
  if (!q.filter.tags && !q.filter.workflow) ctx.addIssue({ code: 'custom', path: ['filter', 'tags'], message: `a bulk ${q.action} needs tags or a workflow in its filter: name the tasks it may act on` });
  const allowed: readonly string[] = q.action === 'cancel' ? ['running'] : ['failed', 'compensation_failed'];
  if (q.filter.status !== undefined && !allowed.includes(q.filter.status)) {
    ctx.addIssue({ code: 'custom', path: ['filter', 'status'], message: `a bulk ${q.action} acts on ${allowed.join(' or ')} tasks, not ${q.filter.status}: drop the status or use one of those` });
  }
});
/** A bulk operation's record (decision 0021 §2.2). */
export const BulkOpSchema = z.object({
  id: z.string(),
  action: tolerant(BulkActionSchema),
  filter: BulkFilterSchema,
  step: optional(z.string()),
  reason: optional(z.string()),
  /** The snapshot time: it acts only on tasks created at or before it. */
  asOf: z.number().int(),
  by: z.string(),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
  state: tolerant(z.enum(['running', 'done', 'stopped'])),
  /** The count of matching tasks at asOf (for progress; not a promise). */
  matched: z.number().int().nonnegative(),
  /** The query cursor after the last checkpointed batch (absent: from the start, or the end once done). */
  cursor: optional(z.string()),
  batch: z.number().int().nonnegative(),
  acted: z.number().int().nonnegative(),
  already: z.number().int().nonnegative(),
  skipped: z.number().int().nonnegative(),
  missing: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
});
export type BulkOp = z.output<typeof BulkOpSchema>;
export const BulkStartReplySchema = z.object({ op: BulkOpSchema, resumed: z.boolean() });
/** `bulk.apply`: act on these tasks, in order, as the operation says (at most 100 a request). */
export const BulkApplyRequestSchema = z.object({ opId: NameSchema, taskIds: z.array(TaskIdSchema).min(1).max(100) });
export const BulkOutcomeSchema = z.enum(['acted', 'already', 'skipped', 'missing', 'failed']);
export type BulkOutcome = z.output<typeof BulkOutcomeSchema>;
export const BulkApplyReplySchema = z.object({ results: z.array(z.object({ taskId: z.string(), outcome: tolerant(BulkOutcomeSchema), reason: optional(z.string()) })) });
export type BulkApplyReply = z.output<typeof BulkApplyReplySchema>;
const countsShape = { acted: z.number().int().nonnegative(), already: z.number().int().nonnegative(), skipped: z.number().int().nonnegative(), missing: z.number().int().nonnegative(), failed: z.number().int().nonnegative() };
/** `bulk.checkpoint`: batch `batch` is done; applied only when it is the record's batch + 1. */
export const BulkCheckpointRequestSchema = z.object({ opId: NameSchema, batch: z.number().int().min(1), cursor: optional(z.string().max(400)), counts: z.object(countsShape) });
export const BulkEndRequestSchema = z.object({ opId: NameSchema, state: z.enum(['done', 'stopped']) });
export const BulkGetRequestSchema = z.object({ opId: NameSchema });
export const BulkListRequestSchema = z.object({ limit: z.number().int().min(1).max(200).default(20) });

/** Every API reply: a value or a wire error. */
export const ApiReplySchema = z.union([
  z.object({ ok: z.literal(true), value: z.unknown() }),
  z.object({ ok: z.literal(false), error: WireErrorSchema }),
]);
export type ApiReply = z.output<typeof ApiReplySchema>;
