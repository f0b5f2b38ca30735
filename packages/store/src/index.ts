/**
 * @triad/store — Triad's Redis state store: one key builder, one Lua script per transition (loaded once,
 * called through one wrapper, returning codes mapped to typed errors), task and workflow records, and
 * the deadline index the supervisor reads in O(expired).
 */
export { keys, bucketOf, BUCKETS, LIMITER_PARTS, parseDeadlineMember, TASK_DEADLINE_STEP, PARENT_NOTICE_STEP, ADMIT_STEP, admissionKeys, admissionShare, type Keys, type BucketKeys, type LimitRegistryKeys, type LimiterKeys } from './keys.js';
export { ScriptCode, scriptError, isLeaseBusy, LeaseBusyError, AlreadyAppliedError, isAlreadyApplied } from './codes.js';
export { OpStore, unknownOp, type StartOpArgs, type OpCounts } from './ops-store.js';
export { loadScripts, runScript, SCRIPT_NAMES, type ScriptName } from './scripts.js';
export { TaskStore, requireTask, DEFAULT_CLIENT_ACTIVE_TASKS, type PendingAlert, type StoreOptions, type CreateTaskArgs, type CreateOutcome, type ApplyResultArgs, type PurgedObjects, type ApplyOutcome, type BulkFence, type StartQueuedOutcome, type ChildLink, type StartChildArgs, type ChildOutcome, type NoticeDelivery } from './task-store.js';
export { findStuck, type StuckQuery, type StuckResult } from './stuck.js';
export { TaskSearch, canonicalTags, encodeCursor, decodeCursor, type TaskFilter, type QueryResult, type CountResult } from './search.js';
export { WorkflowStore, type CompiledWorkflow, type WorkflowSummary } from './workflow-store.js';
export { ScheduleStore, unknownSchedule, type ScheduleDefinition, type StoredSchedule, type FireAction, type ScheduledSubmission } from './schedule-store.js';
export { IntakeStore, EVERY_OTHER_CLIENT, LIMITS_REFRESH_MS } from './intake-store.js';
export {
  LimitStore,
  LimitCache,
  compactLimit,
  RegistryEntrySchema,
  PERMIT_GRACE_MS,
  PRIORITY_AGING_MS,
  DEFAULT_LIMITS_REFRESH_MS,
  MAX_LIMIT_KEY_BYTES,
  type LimitConfig,
  type RegistryEntry,
  type QueueItem,
  type LimiterOps,
  type Grant,
  type LimiterReply,
  type LimiterStats,
  type LimiterPlace,
} from './limit-store.js';
export { toTaskEvent, elementValueKey, elementOutputKey, childInputKey, type ChildOp, type Transition, type TransitionEvent, type Dispatch, type Expiry, type ExpireAction, type LimiterRequests, type QueuedPhase } from './transitions.js';
export { Leadership, MIN_LEASE_MS, type LeadershipOptions, type LeadershipState } from './leadership.js';
export { Leases, type LeaseClaim } from './leases.js';
export { connectRedis, connectStore, explainRedisRefusal, type RedisHandlers } from './connect.js';
export type { RedisClient } from './client.js';
