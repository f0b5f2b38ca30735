/**
 * The Supervisor actor: on every interval the leader reads the steps (and task deadlines) whose time has
 * passed (the deadline index, O(expired)), applies the failure ladder through one fenced transition
 * each, and asks a scheduler to send what the transition started (a retry command). It knows nothing of
 * the business: the ladder comes from the task's pinned plan. It publishes the operator alerts the
 * transitions recorded (the outbox; decision 0009), and runs retention: finished tasks past
 * TRIAD_RETENTION_MS are removed, and those that can never be retried are compacted once past
 * TRIAD_COMPACT_AFTER_MS (decision 0007), each a bounded batch per sweep, fenced by the leader epoch.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ensureStreams, publishDurable, publishPlain, publishTaskEvents, type Bus } from '@triad/bus';
import { encode, errorMessage, isTriadError, silentLogger, type Logger, type SupervisorCommand, type SupervisorHealth } from '@triad/protocol';
import { Leadership, TASK_DEADLINE_STEP, toTaskEvent, type Expiry, type PendingAlert, type RedisClient, type TaskStore } from '@triad/store';
import { ROOT_CONTEXT, SpanKind, contextFromHeaders, countTaskEnd, inSpan, spanContextOf, tracingEnabled, triadMetrics, type Context, type Link } from '@triad/telemetry';

/** Expired steps handled at once within a sweep. */
const SWEEP_CONCURRENCY = 16;
/** The shortest pause between two sweeps, however close the next deadline. */
const MIN_SWEEP_GAP_MS = 10;
/** Outbox alerts published per sweep (the rest wait for the next one). */
const ALERTS_PER_SWEEP = 100;

export interface SupervisorOptions {
  bus: Bus;
  tasks: TaskStore;
  /** A dedicated Redis connection for the leadership lease. */
  leaderRedis: RedisClient;
  /** Replicas that must hold an election before the winner leads (TRIAD_REDIS_WAIT_REPLICAS, decision 0015). */
  waitReplicas?: number;
  id?: string;
  logger?: Logger;
  /** How often the leader sweeps. */
  intervalMs?: number;
  /** The leadership lease; a new leader takes over within this after the old one dies. */
  leaseMs?: number;
  /** Expired steps handled per sweep (the rest wait for the next one). */
  batchSize?: number;
  /** Finished tasks are removed this long after they finished (default 24 h). */
  retentionMs?: number;
  /**
   * Finished tasks that can never be retried (completed, compensated, cancelled) keep their full record
   * this long, for operators to inspect, then the leader compacts it (default 10 min; 0 = on the next
   * sweep). Decision 0007.
   */
  compactAfterMs?: number;
}

/** The default of `compactAfterMs` (TRIAD_COMPACT_AFTER_MS). */
export const DEFAULT_COMPACT_AFTER_MS = 600_000;


export class Supervisor {
  readonly id: string;
  readonly health: SupervisorHealth;
  private readonly log: Logger;
  private readonly leadership: Leadership;
  private readonly intervalMs: number;
  private readonly leaseMs: number;
  private sweepTimer: NodeJS.Timeout | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped = false;
  /** Epoch ms of the last retention pass and health report: both run at most once per interval. */
  private lastRetentionAt = 0;
  private lastReportAt = 0;
  /** The last sweep found as many expired steps as it could take: sweep again at once. */
  private behind = false;
  /** A bucket had more due than its share in the last retention pass: run the next one without waiting. */
  private retentionBehind = false;

  constructor(private readonly o: SupervisorOptions) {
    this.id = o.id ?? `supervisor-${randomUUID().slice(0, 8)}`;
    this.log = o.logger ?? silentLogger;
    this.intervalMs = o.intervalMs ?? 1_000;
    this.leaseMs = o.leaseMs ?? 5_000;
    this.leadership = new Leadership(o.leaderRedis, o.bus.names.namespace, this.id, this.leaseMs, o.waitReplicas ?? 0);
    this.health = {
      supervisorId: this.id,
      leading: false,
      epoch: 0,
      handled: 0,
      expiredWaiting: 0,
      retries: 0,
      parked: 0,
      errors: 0,
      undos: 0,
      abandoned: 0,
      alertsPublished: 0,
      purged: 0,
      compacted: 0,
      fencedWrites: 0,
    };
  }

  async start(): Promise<void> {
    await ensureStreams(this.o.bus);
    await this.renew();
    this.leaseTimer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.scheduleSweep(0);
    this.log.info(
      { supervisorId: this.id, intervalMs: this.intervalMs, leaseMs: this.leaseMs, retentionMs: this.o.retentionMs ?? 86_400_000, compactAfterMs: this.o.compactAfterMs ?? DEFAULT_COMPACT_AFTER_MS },
      'supervisor started',
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sweepTimer);
    clearInterval(this.leaseTimer);
    await this.sweeping;
    await this.leadership.resign();
  }

  isLeader(): boolean {
    return this.leadership.isLeader();
  }

  /**
   * Sweeps on a timer that the leader sets to the earliest deadline in the index (never later than one
   * interval, never sooner than 10 ms after the last sweep): a step is retried as soon as its complete-by
   * passes, not up to an interval later. A deadline written after the timer was set is found within an
   * interval, as before.
   */
  private scheduleSweep(delayMs: number): void {
    if (this.stopped) return;
    this.sweepTimer = setTimeout(() => {
      this.sweeping = (async () => {
        let next = this.intervalMs;
        try {
          await this.sweep();
          next = await this.nextSweepDelay();
        } catch (e) {
          this.log.warn({ err: errorMessage(e) }, 'sweep failed; trying again next interval');
        } finally {
          this.sweeping = undefined;
          this.scheduleSweep(next);
        }
      })();
    }, delayMs);
  }

  private async nextSweepDelay(): Promise<number> {
    if (!this.leadership.isLeader()) return this.intervalMs;
    if (this.behind || this.retentionBehind) return MIN_SWEEP_GAP_MS;
    const next = await this.o.tasks.nextDeadline();
    if (next === undefined) return this.intervalMs;
    return Math.min(this.intervalMs, Math.max(MIN_SWEEP_GAP_MS, next - Date.now() + 1));
  }

  private async renew(): Promise<void> {
    if (this.stopped) return;
    try {
      const s = await this.leadership.tick();
      const m = triadMetrics();
      const labels = { namespace: this.o.bus.names.namespace };
      if (s.leading && (!this.health.leading || s.epoch !== this.health.epoch)) {
        this.log.info({ supervisorId: this.id, epoch: s.epoch }, 'leading');
        m.leadershipChanges.inc(labels);
      }
      if (s.replicated === false) {
        this.log.warn({ supervisorId: this.id, epoch: s.epoch }, 'leading, but no Redis replica acknowledged the election (TRIAD_REDIS_WAIT_REPLICAS): a failover of its primary now could issue this epoch again');
      }
      m.leading.set(labels, s.leading ? 1 : 0);
      m.epoch.set(labels, s.epoch);
      this.health.leading = s.leading;
      this.health.epoch = s.epoch;
      if (s.leading) this.health.leader = this.id;
      else if (s.holder) this.health.leader = s.holder.split('|')[0];
    } catch (e) {
      this.health.leading = this.leadership.isLeader();
      this.log.warn({ err: errorMessage(e) }, 'leadership lease could not be renewed');
    }
  }

  /** One sweep: handles up to batchSize expired steps. Public so tests and the benchmark can drive it. */
  async sweep(): Promise<void> {
    if (!this.leadership.isLeader()) {
      // Followers (and a leader that lost its lease) still report, so operators see who leads.
      this.health.leading = false;
      await this.publishHealth();
      return;
    }
    const started = performance.now();
    const now = Date.now();
    const epoch = this.leadership.currentEpoch();
    const batch = this.o.batchSize ?? 500;
    const expired = await this.o.tasks.expiredSteps(now, batch);
    this.behind = expired.length >= batch;
    const m = triadMetrics();
    const labels = { namespace: this.o.bus.names.namespace };
    m.sweeps.inc(labels);
    // Lag: how long the most overdue step waited past its deadline before this sweep found it.
    m.sweepLag.set(labels, expired.reduce((lag, e) => Math.max(lag, now - e.completeBy), 0) / 1000);
    // A few steps at a time: each is its own transition (different tasks never conflict), and a mass
    // failure is worked off at Redis' pace rather than one round trip after another.
    let deposed = false;
    for (let i = 0; i < expired.length && !deposed; i += SWEEP_CONCURRENCY) {
      // Stop at once if the lease lapsed mid-sweep (a pause, a partition): the epoch fences us anyway.
      if (this.stopped || !this.leadership.isLeader()) break;
      await Promise.all(
        expired.slice(i, i + SWEEP_CONCURRENCY).map(async ({ taskId, step }) => {
          try {
            const x = step === TASK_DEADLINE_STEP ? await this.o.tasks.expireTask(taskId, now, epoch) : await this.o.tasks.expireStep(taskId, step, now, epoch);
            await this.act(taskId, step, epoch, x, now);
            this.health.handled++;
          } catch (e) {
            if (isTriadError(e, 'STALE')) {
              this.health.fencedWrites++;
              m.fencedWrites.inc(labels);
              deposed = true;
              this.log.warn({ taskId, step, epoch }, 'write rejected: a newer supervisor epoch exists; stepping down');
              return;
            }
            this.log.error({ err: errorMessage(e), taskId, step }, 'could not handle an expired step; retrying next sweep');
          }
        }),
      );
    }
    if (!deposed) await this.publishAlerts();
    this.health.sweepMs = performance.now() - started;
    m.sweepDuration.observe(labels, this.health.sweepMs / 1000);
    // Retention: finished tasks past their time go, a batch per sweep (their count never enters the scan above);
    // then those that can never be retried and are past the compaction delay get their compact record
    // (after the purge, so nothing about to be deleted is compacted first). Both read their index in O(due).
    // Each pass walks every bucket with its share of the batch (decision 0015); a bucket left with more
    // due runs the next pass at the next sweep rather than an interval later.
    if (this.retentionBehind || now - this.lastRetentionAt >= this.intervalMs) {
      this.lastRetentionAt = now;
      let behind = false;
      await this.retention('purge', async () => {
        const r = await this.o.tasks.purgeFinishedBuckets(now - (this.o.retentionMs ?? 86_400_000), batch, epoch);
        this.health.purged += r.removed;
        behind ||= r.full;
      });
      await this.retention('compaction', async () => {
        const r = await this.o.tasks.compactFinishedBuckets(now - (this.o.compactAfterMs ?? DEFAULT_COMPACT_AFTER_MS), batch, epoch);
        this.health.compacted += r.compacted;
        behind ||= r.full;
      });
      this.retentionBehind = behind;
    }
    this.health.lastSweepAt = now;
    // Reported once per interval, or when this sweep had work (so the counters are fresh after a retry).
    if (expired.length > 0 || now - this.lastReportAt >= this.intervalMs) {
      this.lastReportAt = now;
      this.health.expiredWaiting = await this.o.tasks.countExpired(Date.now()).catch(() => this.health.expiredWaiting);
      m.expiredWaiting.set(labels, this.health.expiredWaiting);
      await this.publishHealth();
    }
  }

  /** One retention stage, leader only, fenced by the epoch; a failure waits for the next pass. */
  private async retention(stage: 'purge' | 'compaction', run: () => Promise<void>): Promise<void> {
    if (this.stopped || !this.leadership.isLeader()) return;
    try {
      await run();
    } catch (e) {
      if (isTriadError(e, 'STALE')) this.health.fencedWrites++;
      else this.log.warn({ err: errorMessage(e) }, `retention ${stage} failed; retrying next sweep`);
    }
  }

  /**
   * Acts on one expired step inside a span of the task's trace, linked to the step it acts on
   * (decision 0013); the retry command carries it, so the new attempt continues the same trace.
   */
  private async act(taskId: string, step: string, epoch: number, x: Expiry, now: number): Promise<void> {
    if (x.action === 'noop') return this.actNow(taskId, step, epoch, x, now);
    triadMetrics().ladderActions.inc({ namespace: this.o.bus.names.namespace, action: x.action });
    const found = await this.stepContext(taskId, step, x.client);
    const links: Link[] = found.link ? [{ context: found.link, attributes: { 'triad.link': 'step', 'triad.step': step } }] : [];
    const attributes = {
      'triad.namespace': this.o.bus.names.namespace,
      'triad.task_id': taskId,
      'triad.step': step,
      'triad.kind': x.kind,
      'triad.action': x.action,
      'triad.epoch': epoch,
      ...(x.attempt !== undefined ? { 'triad.attempt': x.attempt } : {}),
      ...(x.failureCount !== undefined ? { 'triad.failure_count': x.failureCount } : {}),
    };
    return inSpan(`triad.supervisor.${x.action}`, { kind: SpanKind.INTERNAL, attributes, links }, () => this.actNow(taskId, step, epoch, x, now), found.parent);
  }

  /**
   * The task's trace as its latest event carries it (the events stream keeps the `traceparent` of the
   * transition that published it): the parent of the supervisor's span, and its link — for a step that
   * failed or timed out, the transition of its last attempt (another step's, when one of the task's
   * parallel steps moved since). Only read when tracing is configured; a task whose events are gone starts
   * a new trace.
   */
  private async stepContext(taskId: string, step: string, client: string): Promise<{ parent: Context; link?: ReturnType<typeof spanContextOf> }> {
    if (!tracingEnabled()) return { parent: ROOT_CONTEXT };
    const bus = this.o.bus;
    try {
      const msg = await bus.jsm.streams.getMessage(bus.names.streams.events, { last_by_subj: bus.names.subjects.event(client, taskId) });
      if (!msg) return { parent: ROOT_CONTEXT };
      const parent = contextFromHeaders(msg.header);
      const link = spanContextOf(parent);
      return link ? { parent, link } : { parent };
    } catch (e) {
      this.log.debug({ err: errorMessage(e), taskId, step }, 'trace context of the task not read: the action starts a trace of its own');
      return { parent: ROOT_CONTEXT };
    }
  }

  private async actNow(taskId: string, step: string, epoch: number, x: Expiry, now: number): Promise<void> {
    const bus = this.o.bus;
    const tasks = this.o.tasks;
    const workflow = x.events.some((e) => e.status !== undefined) ? await tasks.redis.hget(tasks.keys.task(taskId), 'workflow').catch(() => null) : null;
    countTaskEnd(bus.names.namespace, workflow ?? '', x.events, () => tasks.redis.hget(tasks.keys.task(taskId), 'createdAt'), now);
    const work: Promise<unknown>[] = [publishTaskEvents(bus, x.client, taskId, x.events.map((e) => toTaskEvent(taskId, e, now)), x.replyTo)];
    // Inside the action's span: the line carries the task's trace id (decision 0013).
    if (x.action === 'wake') this.log.info({ taskId, step, started: x.dispatch.map((d) => d.step) }, 'sleep ended');
    else if (x.action !== 'error' && x.action !== 'noop') this.log.info({ taskId, step, kind: x.kind, attempt: x.attempt, failureCount: x.failureCount, lastError: x.lastError }, `failure ladder: ${x.action}`);
    if (x.action === 'retry') this.health.retries++;
    else if (x.action === 'compensate') this.health.undos++;
    else if (x.action === 'park') this.health.parked++;
    else if (x.action === 'abandon') this.health.abandoned++;
    else if (x.action === 'error') {
      this.health.errors++;
      this.log.error({ taskId, step, kind: x.kind, failureCount: x.failureCount, lastError: x.lastError }, 'gave up for good: the task ended with an operator alert');
    }
    // The transition already made what it started (a new attempt, the undo's next compensation); ask a
    // scheduler to send it. A lost command is found again when that attempt's complete-by passes.
    for (const d of x.dispatch) {
      const cmd: SupervisorCommand = { type: 'retry_step', taskId, step: d.step, kind: d.kind, attempt: d.attempt, epoch };
      work.push(publishDurable(bus, bus.names.subjects.command, encode(cmd), `${taskId}:${d.step}:${d.kind}:retry:${d.attempt}`));
    }
    await Promise.all(work);
  }

  /**
   * Publishes the alerts transitions recorded (decision 0009): the one place alerts go to the ALERTS
   * stream. The message id makes a repeat (a crash after the publish, before the removal) a no-op.
   */
  private async publishAlerts(): Promise<void> {
    if (this.stopped || !this.leadership.isLeader()) return;
    const bus = this.o.bus;
    try {
      const pending = await this.o.tasks.pendingAlerts(ALERTS_PER_SWEEP);
      if (pending.length === 0) return;
      const done: PendingAlert[] = [];
      const sent = await Promise.allSettled(
        pending.map(async (p) => {
          const { alert } = p;
          await publishDurable(bus, bus.names.subjects.alert, encode(alert), `alert:${alert.id}`);
          done.push(p);
          triadMetrics().alertsPublished.inc({ namespace: bus.names.namespace });
          this.log.error({ ...alert }, 'operator alert raised');
        }),
      );
      // Only what JetStream stored leaves the outbox; the rest is tried again next sweep.
      await this.o.tasks.alertsPublished(done);
      this.health.alertsPublished += done.length;
      const failed = sent.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    } catch (e) {
      this.log.warn({ err: errorMessage(e) }, 'alerts not published; retrying next sweep');
    }
  }

  private async publishHealth(): Promise<void> {
    const h = this.health;
    const bus = this.o.bus;
    try {
      publishPlain(bus, bus.names.subjects.health, encode({ ...h }));
      await this.o.tasks.redis.hset(this.o.tasks.keys.supervisorStatus, this.id, JSON.stringify({ ...h, at: Date.now() }));
    } catch (e) {
      this.log.debug({ err: errorMessage(e) }, 'health not published');
    }
  }
}
