/**
 * @triad/agent — write agents with `defineAgent`, run them with `AgentHost`. Handlers get an
 * idempotency key stable across attempts and an AbortSignal that fires at completeBy.
 */
export { DEFAULT_AGENT_CONCURRENCY, defineAgent, type AgentDefinition, type StepContext } from './define.js';
export { PermanentError, RetryableError, isPermanent, isNotApplied, type StepErrorOptions } from './errors.js';
export { runStep, type StepOutcome, type RunStepOptions } from './run-step.js';
export { AgentHost, resultMessageId, type AgentHostOptions } from './host.js';
export { AgentHostSettingsSchema, BreakerSettingsSchema, resolveAgentHostSettings, type AgentHostSettings, type ResolvedAgentHostSettings } from './options.js';
export { ResultSender } from './result-sender.js';
