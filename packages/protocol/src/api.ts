/**
 * The request/reply API of protocol v1 (docs/protocol.md): per operation, the request body a client
 * sends to `triad.<ns>.api.<op>` and the `value` of the `{ ok: true, value }` reply it gets back (an
 * error is `{ ok: false, error: { code, message, details } }` for every operation).
 */
import { z } from 'zod';
import { PayloadGetReplySchema, PayloadGetRequestSchema, PayloadPutReplySchema, PayloadPutRequestSchema } from './objects.js';
import { WorkflowDefinitionSchema } from './definition.js';
import {
  AlertSchema,
  CancelTaskRequestSchema,
  ClearLimitRequestSchema,
  ClientLimitSchema,
  EmptyRequestSchema,
  GetTaskRequestSchema,
  GetWorkflowRequestSchema,
  ListTasksRequestSchema,
  ListWorkflowsRequestSchema,
  RegisterWorkflowRequestSchema,
  RetryTaskRequestSchema,
  SetLimitRequestSchema,
  SignalReplySchema,
  SignalRequestSchema,
  SupervisorHealthSchema,
  TaskEventSchema,
  TaskEventsRequestSchema,
  TaskStateSchema,
  TaskStatusSchema,
  TaskSummarySchema,
  TaskQuerySchema,
  TaskQueryReplySchema,
  TaskCountRequestSchema,
  TaskCountReplySchema,
  TaskStuckRequestSchema,
  TaskStuckReplySchema,
  BulkStartRequestSchema,
  BulkStartReplySchema,
  BulkApplyRequestSchema,
  BulkApplyReplySchema,
  BulkCheckpointRequestSchema,
  BulkEndRequestSchema,
  BulkGetRequestSchema,
  BulkListRequestSchema,
  BulkOpSchema,
  optional,
  tolerant,
} from './messages.js';
import type { ApiOp } from './names.js';
import { CreateScheduleReplySchema, CreateScheduleRequestSchema, DeleteScheduleReplySchema, ScheduleNameRequestSchema, ScheduleSchema } from './schedules.js';

export const RegisterWorkflowReplySchema = z.object({
  name: z.string(),
  version: z.number().int().min(1),
  /** False when this exact definition was already the latest version (nothing new was stored). */
  created: z.boolean(),
  /** E.g. an agent the workflow names that has never connected. */
  warnings: z.array(z.string()),
});

/** A registered definition: the document with its version and registration time (epoch ms). */
export const RegisteredWorkflowSchema = WorkflowDefinitionSchema.extend({ version: z.number().int().min(1), registeredAt: z.number().int() });

export const WorkflowSummarySchema = z.object({
  name: z.string(),
  latest: z.number().int().min(1),
  versions: z.array(z.number().int().min(1)),
  description: optional(z.string()),
});

export const RetryTaskReplySchema = z.object({ taskId: z.string(), step: z.string(), attempt: z.number().int().nonnegative() });
export const CancelTaskReplySchema = z.object({ taskId: z.string(), status: tolerant(TaskStatusSchema) });
export const SupervisorStatusSchema = z.object({
  leader: optional(z.object({ id: z.string(), epoch: z.number().int().nonnegative() })),
  /** Each supervisor's last report, with the time it was written (epoch ms). */
  supervisors: z.array(SupervisorHealthSchema.extend({ at: z.number().int() })),
});

/**
 * `task.events`: the stored events of a task (sorted by seq, each once), read up to stream sequence
 * `next` (exclusive); `more`: the reply stopped at its size limit — ask again with `from: next`. A reader
 * that later misses an event asks again with `from: next` as well (decision 0022).
 */
export const TaskEventsReplySchema = z.object({ events: z.array(TaskEventSchema), next: z.number().int().min(1), more: z.boolean() });
export const ClearLimitReplySchema = z.object({ client: z.string(), cleared: z.boolean() });

/** Every operation's request and reply value. */
export const API: Record<ApiOp, { request: z.ZodType; reply: z.ZodType; what: string }> = {
  'workflow.register': { request: RegisterWorkflowRequestSchema, reply: RegisterWorkflowReplySchema, what: 'register a workflow definition (operator)' },
  'workflow.get': { request: GetWorkflowRequestSchema, reply: RegisteredWorkflowSchema, what: 'a registered definition, the latest or a version' },
  'workflow.list': { request: ListWorkflowsRequestSchema, reply: z.array(WorkflowSummarySchema), what: 'every registered workflow and its versions' },
  'task.get': { request: GetTaskRequestSchema, reply: TaskStateSchema, what: "a task's whole state" },
  'task.list': { request: ListTasksRequestSchema, reply: z.array(TaskSummarySchema), what: 'recent tasks, newest first, optionally of one status' },
  'task.query': { request: TaskQuerySchema, reply: TaskQueryReplySchema, what: 'tasks by tags, status, workflow, client and creation time, newest first, a page at a time (a client: its own, on api.client.<client>.task.query)' },
  'task.count': { request: TaskCountRequestSchema, reply: TaskCountReplySchema, what: 'how many tasks match task.query\'s filters (a client: its own, on api.client.<client>.task.count)' },
  'payload.put': { request: PayloadPutRequestSchema, reply: PayloadPutReplySchema, what: "one part of a task input's upload to the object store; the last part's reply is the object reference (a client: into its own bucket, on api.client.<client>.payload.put)" },
  'payload.get': { request: PayloadGetRequestSchema, reply: PayloadGetReplySchema, what: 'one chunk of a stored object (a client: of its own bucket, on api.client.<client>.payload.get)' },
  'task.stuck': { request: TaskStuckRequestSchema, reply: TaskStuckReplySchema, what: "unfinished tasks past their workflow's bound or with a deadline no supervisor acted on, latest first (a client: its own, on api.client.<client>.task.stuck)" },
  'task.events': { request: TaskEventsRequestSchema, reply: TaskEventsReplySchema, what: "a task's stored events, oldest first (a client: its own, on api.client.<client>.task.events)" },
  'task.retry': { request: RetryTaskRequestSchema, reply: RetryTaskReplySchema, what: 'resubmit what stopped a task (operator)' },
  'task.cancel': { request: CancelTaskRequestSchema, reply: CancelTaskReplySchema, what: 'stop a running task and undo it (operator)' },
  'task.signal': { request: SignalRequestSchema, reply: SignalReplySchema, what: "send a signal to a task's waitFor step (operator; a client: its own tasks, on api.client.<client>.task.signal)" },
  'alert.list': { request: EmptyRequestSchema, reply: z.array(AlertSchema), what: 'open operator alerts (operator)' },
  'supervisor.status': { request: EmptyRequestSchema, reply: SupervisorStatusSchema, what: 'the supervisor leader and every supervisor report' },
  'bulk.start': { request: BulkStartRequestSchema, reply: BulkStartReplySchema, what: 'start a bulk cancel or retry, or resume one by its id (operator)' },
  'bulk.apply': { request: BulkApplyRequestSchema, reply: BulkApplyReplySchema, what: "act on up to 100 tasks for a bulk operation, each at most once (operator)" },
  'bulk.checkpoint': { request: BulkCheckpointRequestSchema, reply: BulkOpSchema, what: "record a bulk operation's finished batch (operator)" },
  'bulk.end': { request: BulkEndRequestSchema, reply: BulkOpSchema, what: 'mark a bulk operation done or stopped (operator)' },
  'bulk.get': { request: BulkGetRequestSchema, reply: BulkOpSchema, what: 'one bulk operation (operator)' },
  'bulk.list': { request: BulkListRequestSchema, reply: z.array(BulkOpSchema), what: 'recent bulk operations, newest first (operator)' },
  'intake.set': { request: SetLimitRequestSchema, reply: ClientLimitSchema, what: "set a client's submission rate limit (operator)" },
  'intake.clear': { request: ClearLimitRequestSchema, reply: ClearLimitReplySchema, what: "remove a client's submission rate limit (operator)" },
  'intake.list': { request: EmptyRequestSchema, reply: z.array(ClientLimitSchema), what: 'the submission rate limits (operator)' },
  'schedule.create': { request: CreateScheduleRequestSchema, reply: CreateScheduleReplySchema, what: 'create (or with replace, change) a schedule that submits a task per tick (operator)' },
  'schedule.get': { request: ScheduleNameRequestSchema, reply: ScheduleSchema, what: 'one schedule and what its firing recorded (operator)' },
  'schedule.list': { request: EmptyRequestSchema, reply: z.array(ScheduleSchema), what: 'every schedule, paused ones included, by name (operator)' },
  'schedule.pause': { request: ScheduleNameRequestSchema, reply: ScheduleSchema, what: 'stop firing a schedule until it is resumed (operator)' },
  'schedule.resume': { request: ScheduleNameRequestSchema, reply: ScheduleSchema, what: 'fire a paused schedule again, from now on: the paused period is not caught up (operator)' },
  'schedule.delete': { request: ScheduleNameRequestSchema, reply: DeleteScheduleReplySchema, what: 'remove a schedule (operator)' },
};
