/**
 * @triad/agent — write agents with `defineAgent`, run them with `AgentHost`. Handlers get an
 * idempotency key stable across attempts and an AbortSignal that fires at completeBy.
 */
export { DEFAULT_AGENT_CONCURRENCY, defineAgent, type AgentDefinition, type StepContext } from './define.js';
export { PermanentError, RetryableError, ThrottledError, isPermanent, isNotApplied, isThrottled, type StepErrorOptions } from './errors.js';
export { parseRetryAfter, throttledFrom, type HttpReply } from './throttle.js';
export { runStep, type StepOutcome, type RunStepOptions } from './run-step.js';
export { AgentHost, resultMessageId, stepBreaker, type AgentHostOptions } from './host.js';
export { AgentHostSettingsSchema, BreakerSettingsSchema, resolveAgentHostSettings, type AgentHostSettings, type ResolvedAgentHostSettings } from './options.js';
export { ResultSender } from './result-sender.js';
