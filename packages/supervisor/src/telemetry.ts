/**
 * The supervisor's tracing and metrics as `(input, next)` interceptors: around the action on one expired
 * step (its span in the task's trace, the ladder counter) and around a sweep (count, duration, lag).
 * Metrics with only fixed labels are bound once per namespace.
 */
import type { Bus } from '@triad/bus';
import type { Logger } from '@triad/telemetry';
import type { Expiry, NoticeDelivery } from '@triad/store';
import { ROOT_CONTEXT, SpanKind, contextFromHeaders, inSpan, spanContextOf, tracingEnabled, triadMetrics, type Context, type Interceptor, type Link } from '@triad/telemetry';

/** The action a fenced transition decided for one expired step, to be carried out (events, commands). */
export interface ActionInput {
  taskId: string;
  step: string;
  epoch: number;
  expiry: Expiry;
  now: number;
}

/** One sweep's findings, for the sweep metrics. */
export interface SweepOutcome {
  /** Expired steps found (0 for a follower's report-only sweep). */
  expired: number;
  /** How far past its deadline the oldest one was, ms. */
  lagMs: number;
  leading: boolean;
}

export function supervisorMetrics(namespace: string) {
  const m = triadMetrics();
  const labels = { namespace };
  return {
    ladderActions: (action: string) => m.ladderActions.inc({ namespace, action }),
    scheduleTicks: (action: string, n: number) => m.scheduleTicks.inc({ namespace, action }, n),
    childNotices: (status: string, action: string) => m.childNotices.inc({ namespace, status, action }),
    sweeps: m.sweeps.labels(labels),
    sweepDuration: m.sweepDuration.labels(labels),
    sweepLag: m.sweepLag.labels(labels),
    expiredWaiting: m.expiredWaiting.labels(labels),
    leading: m.leading.labels(labels),
    epoch: m.epoch.labels(labels),
    leadershipChanges: m.leadershipChanges.labels(labels),
    fencedWrites: m.fencedWrites.labels(labels),
    alertsPublished: m.alertsPublished.labels(labels),
  };
}
export type SupervisorMetrics = ReturnType<typeof supervisorMetrics>;

/**
 * The action runs inside a span of the task's trace, linked to the step it acts on (decision 0013); the
 * retry command carries it, so the new attempt continues the same trace. A noop is not traced.
 */
export function traceAction(bus: Bus, log: Logger): Interceptor<ActionInput, void> {
  return async (input, next) => {
    const { taskId, step, epoch, expiry: x } = input;
    if (x.action === 'noop') return next(input);
    const found = await stepContext(bus, log, taskId, step, x.client);
    const links: Link[] = found.link ? [{ context: found.link, attributes: { 'triad.link': 'step', 'triad.step': step } }] : [];
    const attributes = {
      'triad.namespace': bus.names.namespace,
      'triad.task_id': taskId,
      'triad.step': step,
      'triad.kind': x.kind,
      'triad.action': x.action,
      'triad.epoch': epoch,
      ...(x.attempt !== undefined ? { 'triad.attempt': x.attempt } : {}),
      ...(x.failureCount !== undefined ? { 'triad.failure_count': x.failureCount } : {}),
    };
    return inSpan(`triad.supervisor.${x.action}`, { kind: SpanKind.INTERNAL, attributes, links }, () => next(input), found.parent);
  };
}

export function countAction(m: SupervisorMetrics): Interceptor<ActionInput, void> {
  return async (input, next) => {
    if (input.expiry.action !== 'noop') m.ladderActions(input.expiry.action);
    return next(input);
  };
}

/** A leader's sweep: counted, timed, and its lag (how overdue the oldest expired step was) recorded. */
export function countSweep(m: SupervisorMetrics): Interceptor<number, SweepOutcome> {
  return async (now, next) => {
    const started = performance.now();
    const o = await next(now);
    if (o.leading) {
      m.sweeps.inc();
      m.sweepLag.set(o.lagMs / 1000);
      m.sweepDuration.observe((performance.now() - started) / 1000);
    }
    return o;
  };
}

/**
 * The task's trace as its latest event carries it (the events stream keeps the `traceparent` of the
 * transition that published it): the parent of the supervisor's span, and its link — for a step that
 * failed or timed out, the transition of its last attempt (another step's, when one of the task's
 * parallel steps moved since). Only read when tracing is configured; a task whose events are gone starts
 * a new trace.
 */
async function stepContext(bus: Bus, log: Logger, taskId: string, step: string, client: string): Promise<{ parent: Context; link?: ReturnType<typeof spanContextOf> }> {
  if (!tracingEnabled()) return { parent: ROOT_CONTEXT };
  try {
    const msg = await bus.jsm.streams.getMessage(bus.names.streams.events, { last_by_subj: bus.names.subjects.event(client, taskId) });
    if (!msg) return { parent: ROOT_CONTEXT };
    const parent = contextFromHeaders(msg.header);
    const link = spanContextOf(parent);
    return link ? { parent, link } : { parent };
  } catch (e) {
    log.debug({ err: e instanceof Error ? e.message : String(e), taskId, step }, 'trace context of the task not read: the action starts a trace of its own');
    return { parent: ROOT_CONTEXT };
  }
}

/** What the leader needs to deliver one child task's notice (decision 0019 §5.3). */
export interface NoticeInput {
  childId: string;
  now: number;
  epoch: number;
}

/** `triad_child_notices_total{status, action}`: each notice delivered, by the child's end and the parent step's action. */
export function countNotice(m: Pick<SupervisorMetrics, 'childNotices'>): Interceptor<NoticeInput, NoticeDelivery | undefined> {
  return async (input, next) => {
    const n = await next(input);
    if (n) m.childNotices(n.childStatus, n.expiry.action);
    return n;
  };
}
