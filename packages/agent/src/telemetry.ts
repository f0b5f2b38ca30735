/**
 * The agent host's tracing and metrics as `(input, next)` interceptors around one step attempt: the span
 * of the attempt (child of the dispatch that sent it) and the step counters, from the attempt's outcome.
 */
import { performance } from 'node:perf_hooks';
import type { StepRequest } from '@triad/protocol';
import { SpanKind, SpanStatusCode, context, trace, tracer, triadMetrics, type Context, type Interceptor, type StepOutcomeLabel } from '@triad/telemetry';
import type { AgentDefinition } from './define.js';
import type { StepOutcome } from './run-step.js';

/** One step attempt this host runs. */
export interface AttemptInput {
  agent: AgentDefinition;
  req: StepRequest;
  deliveryCount: number;
  /** The trace context the request carried. */
  parent: Context;
}

export function outcomeLabel(outcome: StepOutcome): StepOutcomeLabel {
  return outcome.kind === 'ok' ? 'ok' : outcome.kind === 'failed' ? (outcome.retryable ? 'retryable' : 'permanent') : outcome.kind;
}

/** The host's counters for one namespace and agent type, bound to their labels once. */
export function agentMetrics(namespace: string, agent: string) {
  const m = triadMetrics();
  const labels = { namespace, agent };
  return {
    started: m.stepsStarted.labels(labels),
    inFlight: m.stepsInFlight.labels(labels),
    droppedOnArrival: m.stepsDroppedOnArrival.labels(labels),
    redelivered: m.stepsRedelivered.labels(labels),
    ended: (outcome: StepOutcomeLabel, seconds: number) => {
      m.stepsEnded.inc({ ...labels, outcome });
      m.stepDuration.observe({ ...labels, outcome }, seconds);
    },
  };
}
export type AgentMetrics = ReturnType<typeof agentMetrics>;

/**
 * One span per step attempt, child of the dispatch that sent it (the request's `traceparent`): the
 * handler runs inside it, so its instrumented calls (fetch) are its children, and the result is sent
 * with it as its `traceparent` (decision 0013).
 */
export function traceAttempt<O extends StepOutcome>(namespace: string, agentId: string): Interceptor<AttemptInput, O> {
  return async (input, next) => {
    const { agent, req } = input;
    const span = tracer().startSpan(
      `triad.step ${agent.name}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'triad.namespace': namespace,
          'triad.task_id': req.taskId,
          'triad.workflow': req.workflow,
          'triad.step': req.step,
          'triad.kind': req.kind,
          'triad.agent': agent.name,
          'triad.attempt': req.attempt,
          'triad.delivery_count': input.deliveryCount,
          'triad.agent_id': agentId,
        },
      },
      input.parent,
    );
    try {
      const outcome = await context.with(trace.setSpan(input.parent, span), () => next(input));
      span.setAttributes({ 'triad.outcome': outcomeLabel(outcome), 'triad.tries': outcome.tries });
      if (outcome.kind === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.message.slice(0, 500) });
      return outcome;
    } catch (e) {
      span.recordException(e instanceof Error ? e : String(e));
      span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
      throw e;
    } finally {
      span.end();
    }
  };
}

/** The step counters: started, in flight, ended by outcome and how long the attempt took. */
export function countAttempt<O extends StepOutcome>(metrics: (agent: string) => AgentMetrics): Interceptor<AttemptInput, O> {
  return async (input, next) => {
    const m = metrics(input.agent.name);
    m.started.inc();
    m.inFlight.inc();
    const startedAt = performance.now();
    try {
      const outcome = await next(input);
      m.ended(outcomeLabel(outcome), (performance.now() - startedAt) / 1000);
      return outcome;
    } finally {
      m.inFlight.dec();
    }
  };
}
