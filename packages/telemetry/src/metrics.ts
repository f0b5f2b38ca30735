/**
 * The triad_* Prometheus metrics, defined once on prom-client's process-wide registry and labelled by
 * namespace, so several actors in one process (tests, the benchmark) share them without colliding.
 * Libraries increment them; the process shell (@triad/service) serves the registry at GET /metrics.
 */
import { Counter, Gauge, Histogram, register, type Registry } from 'prom-client';

/** How a step attempt ended, as the agent saw it — or `stale` when the scheduler refused its result. */
export const STEP_OUTCOMES = ['ok', 'retryable', 'permanent', 'expired', 'circuit_open', 'throttled', 'stale'] as const;
export type StepOutcomeLabel = (typeof STEP_OUTCOMES)[number];

/** Seconds buckets from a few ms (a cached call) to minutes (a step near its budget, a task with a park). */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Redis scripts run in well under a millisecond when healthy. */
const SCRIPT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

function build(registry: Registry) {
  const registers = [registry];
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) => new Counter<L>({ name, help, labelNames, registers });
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[]) => new Gauge<L>({ name, help, labelNames, registers });
  const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]) =>
    new Histogram<L>({ name, help, labelNames, buckets, registers });
  return {
    // Tasks (scheduler; ended also by the supervisor when it ends a task).
    tasksSubmitted: counter('triad_tasks_submitted_total', 'Submissions accepted: a new task was recorded.', ['namespace', 'workflow']),
    tasksDuplicate: counter('triad_tasks_duplicate_submissions_total', 'Submissions of a task id already recorded (a resubmission or a redelivery): not recorded again.', ['namespace']),
    tasksRejected: counter('triad_tasks_rejected_total', 'Submissions refused, by reason (invalid, unknown_workflow, reply_to, task_id_taken, subject).', ['namespace', 'workflow', 'reason']),
    tasksEnded: counter('triad_tasks_ended_total', 'Tasks that reached a final status (completed, failed, compensated, compensation_failed, cancelled).', ['namespace', 'workflow', 'status']),
    taskDuration: histogram('triad_task_duration_seconds', 'From a task being accepted to its final status.', ['namespace', 'workflow', 'status'], DURATION_BUCKETS),
    // Results at the scheduler.
    results: counter('triad_results_total', 'Step results received by the scheduler: applied, stale (fenced by attempt: late, duplicate, superseded) or forged (wrong agent type).', ['namespace', 'result']),
    resultBatches: counter('triad_result_batches_total', 'Results messages that carried a batch of results (an agent under load).', ['namespace']),
    leaseBusy: counter('triad_task_lease_busy_total', 'Operations put back because another scheduler held the task lease at that moment.', ['namespace']),
    // Steps (agent host).
    stepsStarted: counter('triad_steps_started_total', 'Step attempts an agent began to run.', ['namespace', 'agent']),
    stepsEnded: counter('triad_steps_ended_total', `Step attempts ended, by outcome (${STEP_OUTCOMES.join(', ')}; stale is counted by the scheduler).`, ['namespace', 'agent', 'outcome']),
    stepDuration: histogram('triad_step_duration_seconds', 'How long an agent worked on one step attempt (every try inside its window).', ['namespace', 'agent', 'outcome'], DURATION_BUCKETS),
    stepsInFlight: gauge('triad_steps_in_flight', 'Step attempts an agent process is running now.', ['namespace', 'agent']),
    stepsDroppedOnArrival: counter('triad_steps_dropped_on_arrival_total', 'Step requests that arrived already past complete-by: dropped unrun.', ['namespace', 'agent']),
    stepsRedelivered: counter('triad_steps_redelivered_total', 'Step requests delivered again after an agent stopped signalling (crashed or paused).', ['namespace', 'agent']),
    // Supervisor.
    ladderActions: counter('triad_ladder_actions_total', 'Failure-ladder actions the supervisor took on expired steps (retry, park, error, compensate, abandon).', ['namespace', 'action']),
    sweeps: counter('triad_supervisor_sweeps_total', 'Sweeps of the deadline index by the leader.', ['namespace']),
    sweepDuration: histogram('triad_supervisor_sweep_duration_seconds', 'How long one sweep took.', ['namespace'], DURATION_BUCKETS),
    sweepLag: gauge('triad_supervisor_sweep_lag_seconds', 'At the last sweep: how far past its deadline the oldest expired step was (0 when none was).', ['namespace']),
    expiredWaiting: gauge('triad_supervisor_expired_waiting', 'Expired steps still waiting after the last sweep.', ['namespace']),
    limitWaiting: gauge('triad_limit_waiting', "Steps waiting for their agent type's dispatch limit (the leader supervisor, each interval; decision 0020).", ['namespace', 'agent']),
    limitInFlight: gauge('triad_limit_in_flight', "Live permits of an agent type's dispatch limit: attempts started under it and not ended (the leader supervisor, each interval).", ['namespace', 'agent']),
    limitPaused: gauge('triad_limit_paused', "1 while a service's Retry-After pauses the agent type's dispatches (the leader supervisor, each interval).", ['namespace', 'agent']),
    limitGranted: counter('triad_limit_granted_total', "Permits granted by an agent type's limiter to waiting steps (schedulers, from the limiters' replies).", ['namespace', 'agent']),
    limitWait: histogram('triad_limit_wait_seconds', 'How long a step waited for its agent type\'s limit: from its first wait to its grant (schedulers, at each start).', ['namespace', 'agent'], DURATION_BUCKETS),
    limitReclaimed: counter('triad_limit_reclaimed_total', 'Permits freed at their complete-by + 1 s instead of by a result: a crashed scheduler or agent, a lost release, a silent agent.', ['namespace', 'agent']),
    limitThrottled: counter('triad_limit_throttled_total', "Throttled results (the service answered 429/503 with Retry-After): the step went back in line and the agent type (or its key) paused.", ['namespace', 'agent']),
    leading: gauge('triad_supervisor_leading', '1 while this supervisor is the leader.', ['namespace']),
    epoch: gauge('triad_supervisor_epoch', 'The leadership epoch this supervisor last saw (the fencing value of leader writes).', ['namespace']),
    leadershipChanges: counter('triad_supervisor_leadership_changes_total', 'Times this supervisor became leader, or saw the epoch change.', ['namespace']),
    fencedWrites: counter('triad_supervisor_fenced_writes_total', 'Leader writes rejected because a newer epoch exists.', ['namespace']),
    alertsPublished: counter('triad_alerts_published_total', 'Operator alerts published to the alerts stream.', ['namespace']),
    childNotices: counter('triad_child_notices_total', "Child tasks' notices the leader delivered to their parent's step (decision 0019 §5.3), by how the child ended (completed, failed, compensated, compensation_failed, cancelled) and what the parent's step did (done, error, compensate, drain, ended, compensated, noop).", ['namespace', 'status', 'action']),
    scheduleTicks: counter('triad_schedule_ticks_total', 'Schedule ticks the leader handled: fired (a task submitted), skipped (overlap skip: the previous task still ran), missed (older than the catch-up window after an outage: not fired).', ['namespace', 'action']),
    // Least privilege (decision 0022).
    apiRequestsRefused: counter('triad_api_requests_refused_total', "API requests neither run nor answered because their reply subject is not the requester's inbox (dead-lettered with the reason).", ['namespace', 'endpoint']),
    submissionsDelayed: counter('triad_submissions_delayed_total', "Submissions put back until their client's rate limit lets them through.", ['namespace']),
    // Dead letters (every actor).
    deadLetters: counter('triad_dead_letters_total', 'Messages moved to the dead-letter stream, by source and reason class.', ['namespace', 'source', 'reason']),
    // NATS consumers (read from consumer info at scrape time).
    consumerPending: gauge('triad_nats_consumer_pending', 'Messages in the stream not yet delivered to this durable consumer.', ['namespace', 'stream', 'consumer']),
    consumerAckPending: gauge('triad_nats_consumer_ack_pending', 'Messages delivered to this durable consumer and not yet acknowledged.', ['namespace', 'stream', 'consumer']),
    consumerRedelivered: gauge('triad_nats_consumer_redelivered', 'Messages this durable consumer has delivered more than once and not yet acknowledged.', ['namespace', 'stream', 'consumer']),
    // Redis.
    scriptDuration: histogram('triad_redis_script_duration_seconds', 'Time of one Redis transition script call, by script.', ['namespace', 'script'], SCRIPT_BUCKETS),
  };
}

export type TriadMetrics = ReturnType<typeof build>;

const built = new WeakMap<Registry, TriadMetrics>();

/** The triad_* metrics on `registry` (prom-client's default registry unless told), defined once per registry. */
export function triadMetrics(registry: Registry = register): TriadMetrics {
  let m = built.get(registry);
  if (!m) {
    m = build(registry);
    built.set(registry, m);
  }
  return m;
}

/** The registry GET /metrics serves. */
export const metricsRegistry: Registry = register;

/**
 * A dead letter's reason reduced to a small fixed set, so a label never carries free text (each reason
 * is its own message: its full text stays in the dead letter itself).
 */
export function deadLetterReasonClass(reason: string): string {
  const r = reason.toLowerCase();
  if (r.includes('protocol') && r.includes('does not speak')) return 'protocol_version';
  if (r.includes('forged')) return 'forged';
  if (r.includes('too large') || r.includes('exceeds') || r.includes('bytes')) return 'too_large';
  if (r.includes('subject must name') || r.includes('subject')) return 'subject';
  if (r.includes('unknown workflow') || r.includes('is not registered')) return 'unknown_workflow';
  if (r.includes('unknown task') || r.includes('unknown step') || r.includes('no task') || r.includes('no step')) return 'unknown_task';
  if (r.includes('taken by')) return 'task_id_taken';
  if (r.includes('redeliver') || r.includes('deliveries')) return 'max_deliveries';
  if (r.includes('msgpack') || r.includes('decode') || r.includes('invalid') || r.includes('expected') || r.includes('required')) return 'invalid';
  return 'other';
}

/**
 * Counts a task that reached a final status, and its duration when the time it was accepted is known
 * (from the scheduler's transition, or read from the task record).
 */
export function recordTaskEnded(namespace: string, workflow: string, status: string, createdAtMs: number | undefined, now: number = Date.now()): void {
  const m = triadMetrics();
  m.tasksEnded.inc({ namespace, workflow, status });
  if (createdAtMs !== undefined && Number.isFinite(createdAtMs) && createdAtMs > 0) m.taskDuration.observe({ namespace, workflow, status }, Math.max(0, now - createdAtMs) / 1000);
}

/** The final task statuses (protocol's TERMINAL_TASK_STATUSES; this package depends on nothing of Triad's). */
const FINAL_STATUSES = new Set(['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled']);

/**
 * Counts the task's end when a transition's events end it (an event whose status is final), with its
 * duration from the record's createdAt, which every transition's reply carries (the scheduler's and the
 * supervisor's). Both the scheduler and the supervisor end tasks, so both call it.
 */
export function countTaskEnd(namespace: string, workflow: string, events: readonly { status?: string | undefined }[], createdAt: number | undefined, now: number = Date.now()): void {
  const status = events.find((e) => e.status !== undefined && FINAL_STATUSES.has(e.status))?.status;
  if (status === undefined) return;
  recordTaskEnded(namespace, workflow, status, createdAt, now);
}
