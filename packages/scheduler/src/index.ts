/**
 * @triad/scheduler — the Scheduler actor: submissions and results in, atomic transitions in the store,
 * step requests and task events out; plus the request/reply API clients use.
 */
export { Scheduler, type SchedulerOptions } from './scheduler.js';
export { SchedulerSettingsSchema, resolveSchedulerSettings, type SchedulerSettings, type ResolvedSchedulerSettings } from './options.js';
export { schedulerMetrics, type SchedulerMetrics, type SubmissionInput, type SubmissionOutcome, type ResultInput, type ResultOutcome, type CommandInput } from './telemetry.js';
export { ApiServer, scheduleTiming } from './api.js';
export { Dispatcher, stepMessageId, stepRequestMessages, type StepRequestMessage, type DispatcherOptions } from './dispatcher.js';
export { BatchTakers, StepSender, BATCH_TAKERS_MAX_AGE_MS } from './step-batches.js';
export { EventSender } from './event-batches.js';
