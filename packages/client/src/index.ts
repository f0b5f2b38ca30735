/** @triad/client — the SDK a submitting application uses; it speaks only NATS. */
export {
  TriadClient,
  type ClientOptions,
  type TaskReads,
  type SubmitOptions,
  type WorkflowSummary,
  type SupervisorStatus,
  type SupervisorReport,
  type TaskEventsPage,
} from './client.js';
export { runBulkOperation, doneOf, DEFAULT_BULK_RATE, MAX_BATCH, type BulkApi, type BulkClock, type BulkCounts, type BulkProgress, type BulkRunOptions } from './bulk.js';
export { clientOptionsFromEnv } from './options.js';
export {
  decodeOriginal,
  deadLetterWriter,
  replayPlan,
  sourceToken,
  type DecodedOriginal,
  type DeadLetterQuery,
  type DeadLetterWriter,
  type ReplayPlan,
  type ReplayResult,
  type StoredDeadLetter,
} from './dead-letters.js';
