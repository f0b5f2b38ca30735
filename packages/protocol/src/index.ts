/**
 * @triad/protocol — the wire contract between Triad's actors and clients: zod schemas, subjects and
 * stream names, the msgpackr codec, and typed errors. No I/O.
 *
 * @example
 *   import { names, encode, decode, SubmissionSchema } from '@triad/protocol';
 *   const n = names('dev');
 *   const bytes = encode({ taskId: 't1', workflow: 'orders', input: {}, submittedAt: Date.now() });
 *   const msg = decode(bytes, SubmissionSchema, 'submission'); // { ok: true, value } | { ok: false, error }
 */
export { ErrorCode, TriadError, isTriadError, errorMessage, type WireError } from './errors.js';
export {
  names,
  type Names,
  type ApiOp,
  API_OPS,
  NamespaceSchema,
  NameSchema,
  TaskIdSchema,
  NAME_PATTERN,
  NAMESPACE_PATTERN,
  TASK_ID_PATTERN,
  ClientIdSchema,
  DEFAULT_CLIENT_ID,
  subjectToken,
} from './names.js';
export {
  RetryPolicySchema,
  LadderSchema,
  CompensationSchema,
  StepDefinitionSchema,
  FailurePolicySchema,
  WorkflowDefinitionSchema,
  type RetryPolicy,
  type Ladder,
  type LadderInput,
  type Compensation,
  type StepDefinition,
  type StepDefinitionInput,
  type FailurePolicy,
  type WorkflowDefinition,
  type WorkflowDefinitionInput,
  type RegisteredWorkflow,
} from './definition.js';
export {
  SubmissionSchema,
  StepKindSchema,
  StepRequestSchema,
  StepResultSchema,
  TaskStatusSchema,
  StepStatusSchema,
  TaskEventTypeSchema,
  TaskEventSchema,
  TaskEventBatchSchema,
  SupervisorCommandSchema,
  AlertSchema,
  DeadLetterSchema,
  SupervisorHealthSchema,
  WireErrorSchema,
  RegisterWorkflowRequestSchema,
  GetWorkflowRequestSchema,
  ListWorkflowsRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  RetryTaskRequestSchema,
  CancelTaskRequestSchema,
  EmptyRequestSchema,
  StepStateSchema,
  TaskStateSchema,
  TaskSummarySchema,
  ApiReplySchema,
  TERMINAL_TASK_STATUSES,
  isTerminal,
  type Submission,
  type StepKind,
  type StepRequest,
  type StepResult,
  type TaskStatus,
  type StepStatus,
  type TaskEventType,
  type TaskEvent,
  type TaskEventBatch,
  type SupervisorCommand,
  type Alert,
  type DeadLetter,
  type SupervisorHealth,
  type StepState,
  type TaskState,
  type TaskSummary,
  type ApiReply,
} from './messages.js';
export { encode, decode, decodeOrThrow, validate, unpackTrusted, unpackUntrusted, integersAsIntegers, DEFAULT_MAX_MESSAGE_BYTES, MAX_NESTING_DEPTH, MAX_LISTED_ISSUES, MAX_ISSUE_CHARS, type Decoded } from './codec.js';
export { loadConfig, ConfigSchema, type Config } from './config.js';
export {
  CONNECTION_VARIABLES,
  DEFAULT_NATS_URL,
  DEFAULT_REDIS_URL,
  checkNatsSettings,
  checkRedisSettings,
  natsOptionsFromEnv,
  parseNatsSettings,
  parseRedisSettings,
  redactUrl,
  redisOptionsFromEnv,
  resolveLabels,
  type ConnectionVariable,
  type Labels,
  type NatsAuth,
  type NatsSettings,
  type NatsConnectionOptions,
  type NatsTlsFiles,
  type RedisSettings,
  type RedisConnectionOptions,
  type SettingLabels,
  type SettingProblem,
} from './connection-settings.js';
export { errorCodes, explainTlsFailure, tlsDetail, tlsFailure, unreadableSettingFile, type TlsContext, type TlsFailure } from './connection-errors.js';
export { silentLogger, type Logger } from './logger.js';
export { decodeResults, StepResultBatchSchema, MAX_RESULTS_PER_BATCH, type StepResultBatch, type ResultItem } from './result-batch.js';
export {
  API,
  RegisterWorkflowReplySchema,
  RegisteredWorkflowSchema,
  WorkflowSummarySchema,
  RetryTaskReplySchema,
  CancelTaskReplySchema,
  SupervisorStatusSchema,
} from './api.js';
export { protocolJsonSchemas } from './json-schemas.js';
