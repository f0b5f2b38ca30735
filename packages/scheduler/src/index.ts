/**
 * @triad/scheduler — the Scheduler actor: submissions and results in, atomic transitions in the store,
 * step requests and task events out; plus the request/reply API clients use.
 */
export { Scheduler, type SchedulerOptions, type SchedulerMetrics } from './scheduler.js';
export { ApiServer } from './api.js';
export { Dispatcher, stepMessageId, stepRequestMessages, type StepRequestMessage } from './dispatcher.js';
