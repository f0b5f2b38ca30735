/**
 * The scheduler's tracing and metrics as `(input, next)` interceptors around its three handlers
 * (submissions, results, supervisor commands): the handlers return what happened, the interceptors
 * record it. Metrics with only fixed labels are bound once per namespace.
 */
import type { MsgHdrs } from '@nats-io/nats-core';
import type { Disposition } from '@triad/bus';
import type { StepResult, SupervisorCommand } from '@triad/protocol';
import { SpanKind, contextFromHeaders, inSpan, triadMetrics, type Context, type Interceptor } from '@triad/telemetry';

/** A submission as the consumer delivers it. */
export interface SubmissionInput {
  data: Uint8Array;
  deliveryCount: number;
  subject: string;
  headers?: MsgHdrs | undefined;
}

/** What became of a submission: its disposition, and what the interceptors record. */
export interface SubmissionOutcome {
  disposition: Disposition;
  /** busy: another scheduler held the task's lease (put back for a moment; counted as lease_busy). */
  outcome: 'accepted' | 'duplicate' | 'rejected' | 'delayed' | 'busy';
  /** For a rejection: invalid, unknown_workflow, reply_to, task_id_taken, subject. */
  reason?: string;
  taskId?: string;
  workflow?: string;
  client?: string;
  delayMs?: number;
}

/** One step result (alone, or one of a batch), with the trace context its attempt sent. */
export interface ResultInput {
  result: StepResult;
  bytes: Uint8Array;
  /** The output's bytes when the decoder left it opaque (a large result, decision 0025): not in `result`. */
  output?: Uint8Array | undefined;
  agentType: string;
  deliveryCount: number;
  parent: Context;
  batched: boolean;
}

export interface ResultOutcome {
  disposition: Disposition;
  /** applied, stale (fenced by the attempt), forged (another agent type's), unknown (no such task or step), busy (lease held elsewhere). */
  result: 'applied' | 'stale' | 'forged' | 'unknown' | 'busy';
}

export interface CommandInput {
  command: SupervisorCommand;
  headers?: MsgHdrs | undefined;
}

/** The scheduler's metrics for one namespace, bound to their fixed labels once. */
export function schedulerMetrics(namespace: string) {
  const m = triadMetrics();
  return {
    tasksSubmitted: (workflow: string) => m.tasksSubmitted.inc({ namespace, workflow }),
    tasksRejected: (workflow: string, reason: string) => m.tasksRejected.inc({ namespace, workflow, reason }),
    tasksDuplicate: m.tasksDuplicate.labels({ namespace }),
    submissionsDelayed: m.submissionsDelayed.labels({ namespace }),
    results: { applied: m.results.labels({ namespace, result: 'applied' }), stale: m.results.labels({ namespace, result: 'stale' }), forged: m.results.labels({ namespace, result: 'forged' }) },
    staleSteps: (agent: string) => m.stepsEnded.inc({ namespace, agent, outcome: 'stale' }),
    resultBatches: m.resultBatches.labels({ namespace }),
    leaseBusy: m.leaseBusy.labels({ namespace }),
    limitThrottled: (agent: string) => m.limitThrottled.inc({ namespace, agent }),
  };
}

/** The flow-control metrics of decision 0020 §6 the scheduler records (its FlowControl calls them). */
export interface LimitMetrics {
  /** A limiter's reply: its grants, and the permits it reclaimed. */
  reply(agent: string, grants: number, reclaimed: number): void;
  /** A grant started: how long the step waited, from its first wait to the grant. */
  started(agent: string, waitedMs: number): void;
}

export function limitMetrics(namespace: string): LimitMetrics {
  const m = triadMetrics();
  return {
    reply: (agent, grants, reclaimed) => {
      if (grants > 0) m.limitGranted.inc({ namespace, agent }, grants);
      if (reclaimed > 0) m.limitReclaimed.inc({ namespace, agent }, reclaimed);
    },
    started: (agent, waitedMs) => m.limitWait.observe({ namespace, agent }, Math.max(0, waitedMs) / 1000),
  };
}
export type SchedulerMetrics = ReturnType<typeof schedulerMetrics>;

/** The submission continues the submitter's trace (its `traceparent` header), or starts one: the task's trace. */
export function traceSubmission(namespace: string): Interceptor<SubmissionInput, SubmissionOutcome> {
  return (input, next) =>
    inSpan(
      'triad.task.receive',
      { kind: SpanKind.CONSUMER, attributes: { 'triad.namespace': namespace } },
      async (span) => {
        const o = await next(input);
        span.setAttributes({
          'triad.outcome': o.outcome,
          ...(o.taskId !== undefined ? { 'triad.task_id': o.taskId } : {}),
          ...(o.workflow !== undefined ? { 'triad.workflow': o.workflow } : {}),
          ...(o.client !== undefined ? { 'triad.client': o.client } : {}),
          ...(o.reason !== undefined ? { 'triad.reason': o.reason } : {}),
          ...(o.delayMs !== undefined ? { 'triad.delay_ms': o.delayMs } : {}),
        });
        return o;
      },
      contextFromHeaders(input.headers),
    );
}

export function countSubmission(m: SchedulerMetrics): Interceptor<SubmissionInput, SubmissionOutcome> {
  return async (input, next) => {
    const o = await next(input);
    if (o.outcome === 'accepted') m.tasksSubmitted(o.workflow ?? '');
    else if (o.outcome === 'duplicate') m.tasksDuplicate.inc();
    else if (o.outcome === 'delayed') m.submissionsDelayed.inc();
    else if (o.outcome === 'rejected') m.tasksRejected(o.workflow ?? '', o.reason ?? 'invalid');
    return o;
  };
}

/** A result continues the trace of the attempt that sent it (decision 0013). */
export function traceResult(namespace: string): Interceptor<ResultInput, ResultOutcome> {
  return (input, next) => {
    const r = input.result;
    const attributes = {
      'triad.namespace': namespace,
      'triad.task_id': r.taskId,
      'triad.step': r.step,
      'triad.kind': r.kind,
      'triad.attempt': r.attempt,
      'triad.agent': input.agentType,
      'triad.ok': r.ok,
      'triad.batched': input.batched,
    };
    return inSpan(
      'triad.result.apply',
      { kind: SpanKind.CONSUMER, attributes },
      async (span) => {
        const o = await next(input);
        const d = o.disposition;
        span.setAttribute('triad.disposition', typeof d === 'string' ? d : 'deadLetter' in d ? 'dead_letter' : 'retry_later');
        return o;
      },
      input.parent,
    );
  };
}

export function countResult(m: SchedulerMetrics): Interceptor<ResultInput, ResultOutcome> {
  return async (input, next) => {
    const o = await next(input);
    if (o.result === 'applied' || o.result === 'stale' || o.result === 'forged') m.results[o.result].inc();
    if (o.result === 'stale') m.staleSteps(input.agentType);
    // A throttle applied (decision 0020 §5): the step went back in line, the agent type (or key) paused.
    const r = input.result;
    if (o.result === 'applied' && !r.ok && r.error.throttled && !r.error.circuitOpen && r.error.retryable) m.limitThrottled(input.agentType);
    return o;
  };
}

/** A command continues the trace of the supervisor's action: the retried attempt stays in the task's trace. */
export function traceCommand(namespace: string): Interceptor<CommandInput, Disposition> {
  return (input, next) => {
    const c = input.command;
    const attributes =
      c.type === 'retry_step'
        ? { 'triad.namespace': namespace, 'triad.task_id': c.taskId, 'triad.step': c.step, 'triad.kind': c.kind, 'triad.attempt': c.attempt, 'triad.epoch': c.epoch }
        : c.type === 'queue_step'
          ? { 'triad.namespace': namespace, 'triad.task_id': c.taskId, 'triad.step': c.step, 'triad.kind': c.kind, 'triad.epoch': c.epoch }
          : { 'triad.namespace': namespace, 'triad.agent': c.agent, 'triad.epoch': c.epoch };
    return inSpan(`triad.command.${c.type}`, { kind: SpanKind.CONSUMER, attributes }, () => next(input), contextFromHeaders(input.headers));
  };
}
