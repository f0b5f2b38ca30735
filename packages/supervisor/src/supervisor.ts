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
import { PayloadStore, ensureStreams, publishDurable, publishPlain, publishTaskEvents, type Bus } from '@triad/bus';
import { LIMITS_FEATURE, TASK_ID_PATTERN, bucketClient, encode, errorMessage, isTriadError, type SupervisorCommand, type SupervisorHealth } from '@triad/protocol';
import { silentLogger, type Logger } from '@triad/telemetry';
import { ADMIT_STEP, Leadership, LimitStore, PARENT_NOTICE_STEP, ScheduleStore, TASK_DEADLINE_STEP, toTaskEvent, type Expiry, type LeadershipState, type NoticeDelivery, type PendingAlert, type PurgedObjects, type RedisClient, type TaskStore } from '@triad/store';
import { countTaskEnd, intercept, triadMetrics, type Next } from '@triad/telemetry';
import { resolveSupervisorSettings, type ResolvedSupervisorSettings, type SupervisorSettings } from './options.js';
import { ScheduleFiring, catchUpWindowMs } from './schedules.js';
import { countAction, countNotice, countSweep, supervisorMetrics, traceAction, type ActionInput, type NoticeInput, type SupervisorMetrics, type SweepOutcome } from './telemetry.js';

/** Expired steps handled at once within a sweep. */
const SWEEP_CONCURRENCY = 16;
/** The shortest pause between two sweeps, however close the next deadline. */
export const MIN_SWEEP_GAP_MS = 10;

/**
 * How long to wait before the next sweep (decision 0004): a follower ticks once per interval; a leader
 * that is behind (a full batch, retention left over) sweeps again at once; otherwise it sleeps until just
 * after the earliest deadline, never longer than the interval nor shorter than MIN_SWEEP_GAP_MS.
 */
export function sweepDelay(s: { leading: boolean; behind: boolean; nextDeadline: number | undefined; now: number; intervalMs: number }): number {
  if (!s.leading) return s.intervalMs;
  if (s.behind) return MIN_SWEEP_GAP_MS;
  if (s.nextDeadline === undefined) return s.intervalMs;
  return Math.min(s.intervalMs, Math.max(MIN_SWEEP_GAP_MS, s.nextDeadline - s.now + 1));
}
/** A limiter whose wake time passed by this much with no scheduler pumping it gets a pump_limit (decision 0020 §2.5). */
export const LIMIT_WAKE_GRACE_MS = 250;
/** What the failure ladder decided (a child's notice reports its own actions: done, drain, ended…, logged where it is delivered). */
const LADDER_ACTIONS: ReadonlySet<string> = new Set(['retry', 'park', 'compensate', 'abandon']);
/** Outbox alerts published per sweep (the rest wait for the next one). */
const ALERTS_PER_SWEEP = 100;

export interface SupervisorOptions extends SupervisorSettings {
  bus: Bus;
  tasks: TaskStore;
  /** Schedules the leader fires (decision 0019 §6); default: on the task store's Redis. */
  schedules?: ScheduleStore;
  /** A dedicated Redis connection to the state store for the election (and the lease, without lockRedis). */
  leaderRedis: RedisClient;
  /**
   * Independent Redis instances on which Redlock holds the leadership lease by quorum
   * (TRIAD_REDLOCK_URLS, decision 0004); default: the state store alone.
   */
  lockRedis?: readonly RedisClient[];
  id?: string;
  logger?: Logger;
}

export class Supervisor {
  readonly id: string;
  readonly health: SupervisorHealth;
  private readonly log: Logger;
  private readonly leadership: Leadership;
  private readonly metrics: SupervisorMetrics;
  /** The handlers inside their interceptors (tracing, metrics). */
  private readonly handleAction: Next<ActionInput, void>;
  private readonly handleSweep: Next<number, SweepOutcome>;
  private readonly deliverNotice: Next<NoticeInput, NoticeDelivery | undefined>;
  /** The settings, every default applied (options.ts). */
  readonly settings: ResolvedSupervisorSettings;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped = false;
  /** Epoch ms of the last retention pass and health report: both run at most once per interval. */
  private lastRetentionAt = 0;
  private lastReportAt = 0;
  /** The last sweep found as many expired steps as it could take: sweep again at once. */
  private behind = false;
  /** A bucket had more due than its share in the last retention pass: run the next one without waiting. */
  private retentionBehind = false;
  /** More schedule ticks were due than one pass fires: fire on at the next sweep without waiting. */
  private schedulesBehind = false;
  private readonly schedules: ScheduleFiring;
  /** Purged tasks' objects are deleted through it (decision 0021 §4.6). */
  private readonly payloads: PayloadStore;
  /** Objects of purged tasks deleted by this process. */
  objectsDeleted = 0;
  /** The dispatch limiters (decision 0020): dequeues of abandoned waits, and the fallback pumps. */
  private readonly limits: LimitStore;
  /** Epoch ms of the last pass over cleared and ended pause-only limiters (at most once per interval). */
  private lastRetireAt = 0;
  /** The agent types whose limit gauges this supervisor set (removed when it stops leading, or they go). */
  private gaugedLimits = new Set<string>();

  constructor(private readonly o: SupervisorOptions) {
    this.id = o.id ?? `supervisor-${randomUUID().slice(0, 8)}`;
    this.log = o.logger ?? silentLogger;
    this.settings = resolveSupervisorSettings(o);
    this.metrics = supervisorMetrics(o.bus.names.namespace);
    this.payloads = new PayloadStore(o.bus);
    this.handleAction = intercept((i) => this.act(i), traceAction(o.bus, this.log), countAction(this.metrics));
    this.handleSweep = intercept((now) => this.sweepExpired(now), countSweep(this.metrics));
    this.deliverNotice = intercept(({ childId, now, epoch }) => this.o.tasks.deliverNotice(childId, now, epoch), countNotice(this.metrics));
    this.limits = o.tasks.limits?.store ?? new LimitStore(o.tasks.redis, o.bus.names.namespace);
    this.schedules = new ScheduleFiring(o.schedules ?? new ScheduleStore(o.tasks.redis, o.bus.names.namespace), o.bus, this.log, this.metrics);
    this.leadership = new Leadership({
      redis: o.leaderRedis,
      ...(o.lockRedis ? { lockServers: o.lockRedis } : {}),
      namespace: o.bus.names.namespace,
      id: this.id,
      leaseMs: this.settings.leaseMs,
      waitReplicas: this.settings.waitReplicas,
      onChange: (s) => this.onLeadership(s),
      onError: (e) => this.log.warn({ err: errorMessage(e) }, 'leadership: Redis not reached; campaigning on'),
    });
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
      queueChecks: 0,
      limitWakes: 0,
      // Announced so that a limit is set only once every supervisor runs them (decision 0020 §1.8).
      features: [LIMITS_FEATURE],
    };
  }

  async start(): Promise<void> {
    await ensureStreams(this.o.bus);
    await this.leadership.start();
    this.scheduleSweep(0);
    this.log.info(
      { supervisorId: this.id, ...this.settings },
      'supervisor started',
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sweepTimer);
    await this.sweeping;
    await this.leadership.stop();
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
        let next = this.settings.intervalMs;
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
    const leading = this.leadership.isLeader();
    const behind = this.behind || this.retentionBehind || this.schedulesBehind;
    // The earliest step deadline or schedule tick (decision 0019 §6.3): a tick fires when it is due.
    const [deadline, tick] = leading && !behind ? await Promise.all([this.o.tasks.nextDeadline(), this.schedules.nextTick()]) : [undefined, undefined];
    const next = deadline === undefined ? tick : tick === undefined ? deadline : Math.min(deadline, tick);
    return sweepDelay({ leading, behind, nextDeadline: next, now: Date.now(), intervalMs: this.settings.intervalMs });
  }

  /** Leadership changed (elected, deposed, another seen leading): health, metrics and the log follow. */
  private onLeadership(s: LeadershipState): void {
    const m = this.metrics;
    if (s.leading && (!this.health.leading || s.epoch !== this.health.epoch)) {
      this.log.info({ supervisorId: this.id, epoch: s.epoch }, 'leading');
      m.leadershipChanges.inc();
      // A new leader sweeps at once rather than at its next follower's tick.
      if (!this.sweeping && this.sweepTimer !== undefined) {
        clearTimeout(this.sweepTimer);
        this.scheduleSweep(0);
      }
    }
    if (!s.leading && this.health.leading) {
      this.log.info({ supervisorId: this.id, epoch: s.epoch }, 'no longer leading');
      // Only the leader reports the limits' gauges: `max by (agent)` across supervisors is the value.
      for (const agent of this.gaugedLimits) {
        triadMetrics().limitWaiting.remove({ namespace: this.o.bus.names.namespace, agent });
        triadMetrics().limitInFlight.remove({ namespace: this.o.bus.names.namespace, agent });
        triadMetrics().limitPaused.remove({ namespace: this.o.bus.names.namespace, agent });
      }
      this.gaugedLimits = new Set();
    }
    if (s.replicated === false) {
      this.log.warn({ supervisorId: this.id, epoch: s.epoch }, 'leading, but no Redis replica acknowledged the election (TRIAD_REDIS_WAIT_REPLICAS): a failover of its primary now could issue this epoch again');
    }
    m.leading.set(s.leading ? 1 : 0);
    m.epoch.set(s.epoch);
    this.health.leading = s.leading;
    this.health.epoch = s.epoch;
    if (s.leading) this.health.leader = this.id;
    else if (s.holder) this.health.leader = s.holder.split('|')[0];
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
    const batch = this.settings.batchSize;
    const { expired } = await this.handleSweep(now);
    await this.fireSchedules(now, epoch);
    await this.wakeLimiters(now, epoch);
    this.health.sweepMs = performance.now() - started;
    // Retention: finished tasks past their time go, a batch per sweep (their count never enters the scan above);
    // then those that can never be retried and are past the compaction delay get their compact record
    // (after the purge, so nothing about to be deleted is compacted first). Both read their index in O(due).
    // Each pass walks every bucket with its share of the batch (decision 0015); a bucket left with more
    // due runs the next pass at the next sweep rather than an interval later.
    if (this.retentionBehind || now - this.lastRetentionAt >= this.settings.intervalMs) {
      this.lastRetentionAt = now;
      let behind = false;
      await this.retention('purge', async () => {
        const r = await this.o.tasks.purgeFinishedBuckets(now - (this.settings.retentionMs), batch, epoch);
        this.health.purged += r.removed;
        behind ||= r.full;
        // The objects the removed tasks owned go with them (decision 0021 §4.6): after the purge, so a
        // crash in between leaves unreferenced objects (the GC backstop's), never a task without its payload.
        await this.deleteObjects(r.objects);
      });
      await this.retention('objects', () => this.collectObjects(now, epoch));
      await this.retention('compaction', async () => {
        const r = await this.o.tasks.compactFinishedBuckets(now - (this.settings.compactAfterMs), batch, epoch);
        this.health.compacted += r.compacted;
        behind ||= r.full;
      });
      this.retentionBehind = behind;
    }
    this.health.lastSweepAt = now;
    // Reported once per interval, or when this sweep had work (so the counters are fresh after a retry).
    if (expired > 0 || now - this.lastReportAt >= this.settings.intervalMs) {
      this.lastReportAt = now;
      this.health.expiredWaiting = await this.o.tasks.countExpired(Date.now()).catch(() => this.health.expiredWaiting);
      this.metrics.expiredWaiting.set(this.health.expiredWaiting);
      await this.publishHealth();
    }
  }

  /** The expired steps of one sweep, each through its fenced transition and then its action; then the alerts. */
  private async sweepExpired(now: number): Promise<SweepOutcome> {
    const epoch = this.leadership.currentEpoch();
    const batch = this.settings.batchSize;
    const expired = await this.o.tasks.expiredSteps(now, batch);
    this.behind = expired.length >= batch;
    // A few steps at a time: each is its own transition (different tasks never conflict), and a mass
    // failure is worked off at Redis' pace rather than one round trip after another.
    let deposed = false;
    for (let i = 0; i < expired.length && !deposed; i += SWEEP_CONCURRENCY) {
      // Stop at once if the lease lapsed mid-sweep (a pause, a partition): the epoch fences us anyway.
      if (this.stopped || !this.leadership.isLeader()) break;
      await Promise.all(
        expired.slice(i, i + SWEEP_CONCURRENCY).map(async ({ taskId, step }) => {
          try {
            if (step === PARENT_NOTICE_STEP) {
              // A finished child task's notice (decision 0019 §5.3): delivered to its parent's step, whose
              // transition is acted on as an expiry of that step is.
              const n = await this.deliverNotice({ childId: taskId, now, epoch });
              if (n) {
                this.log.info({ taskId: n.parentId, step: n.step, childId: n.childId, childStatus: n.childStatus, action: n.expiry.action }, 'child task notice delivered');
                await this.handleAction({ taskId: n.parentId, step: n.step, epoch, expiry: n.expiry, now });
              }
              this.health.handled++;
              return;
            }
            // An admitted task its scheduler did not start within the grace (decision 0024): started here.
            const expiry =
              step === ADMIT_STEP
                ? await this.o.tasks.admitAsLeader(taskId, now, epoch)
                : step === TASK_DEADLINE_STEP
                  ? await this.o.tasks.expireTask(taskId, now, epoch)
                  : await this.o.tasks.expireStep(taskId, step, now, epoch);
            await this.handleAction({ taskId, step, epoch, expiry, now });
            this.health.handled++;
          } catch (e) {
            if (isTriadError(e, 'STALE')) {
              this.health.fencedWrites++;
              this.metrics.fencedWrites.inc();
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
    // Lag: how long the most overdue step waited past its deadline before this sweep found it.
    return { expired: expired.length, lagMs: expired.reduce((lag, e) => Math.max(lag, now - e.completeBy), 0), leading: true };
  }

  /**
   * Schedules (decision 0019 §6.3): the due ticks fired through fenced transitions, then the outbox of
   * fired submissions published (also what a crashed or deposed leader left there).
   */
  private async fireSchedules(now: number, epoch: number): Promise<void> {
    if (this.stopped || !this.leadership.isLeader()) return;
    try {
      const { intervalMs } = this.settings;
      const r = await this.schedules.fireDue(now, epoch, catchUpWindowMs(this.settings), intervalMs, () => !this.stopped && this.leadership.isLeader());
      this.schedulesBehind = r.behind;
      await this.schedules.publishOutbox(now, r.fired, intervalMs);
    } catch (e) {
      this.schedulesBehind = false;
      if (isTriadError(e, 'STALE')) {
        this.health.fencedWrites++;
        this.metrics.fencedWrites.inc();
        this.log.warn({ epoch }, 'schedule fire rejected: a newer supervisor epoch exists');
      } else this.log.warn({ err: errorMessage(e) }, 'schedules not fired; trying again next sweep');
    }
  }

  /** Deletes purged tasks' objects, 32 at a time; a failure is logged (the object is left for a later pass). */
  private async deleteObjects(owned: readonly PurgedObjects[]): Promise<void> {
    const all = owned.flatMap((o) => o.names.map((name) => ({ client: o.client, name })));
    for (let i = 0; i < all.length; i += 32) {
      await Promise.all(
        all.slice(i, i + 32).map(async ({ client, name }) => {
          const bucket = this.payloads.bucketOf(client);
          try {
            if (await this.payloads.delete(bucket, name)) this.objectsDeleted++;
          } catch (e) {
            this.log.warn({ bucket, object: name, err: errorMessage(e) }, 'object of a purged task not deleted');
          }
        }),
      );
    }
  }

  /**
   * The limiters whose wake time passed with no scheduler acting on it (the scheduler holding the timer
   * died): a pump_limit command each (decision 0020 §2.5). One HGET per registered agent type.
   */
  private async wakeLimiters(now: number, epoch: number): Promise<void> {
    const cache = this.o.tasks.limits;
    if (!cache || this.stopped || !this.leadership.isLeader()) return;
    try {
      await cache.refresh(now);
      const bus = this.o.bus;
      await Promise.all(
        cache.agents().map(async (agent) => {
          const at = await this.limits.wakeAt(agent);
          if (at === undefined || at + LIMIT_WAKE_GRACE_MS > now) return;
          const cmd: SupervisorCommand = { type: 'pump_limit', agent, epoch };
          await publishDurable(bus, bus.names.subjects.command, encode(cmd));
          this.health.limitWakes++;
        }),
      );
      if (now - this.lastRetireAt >= this.settings.intervalMs) {
        this.lastRetireAt = now;
        await this.retireLimiters(now);
      }
    } catch (e) {
      this.log.warn({ err: errorMessage(e) }, 'limiter wake times not read; trying again next sweep');
    }
  }

  /**
   * The object GC (decision 0021 §4.6, the backstop): walks each client bucket's metadata in stream order
   * from its checkpoint, each object once, once older than the grace: an object whose task exists becomes
   * the task's (retention deletes it later); one whose task does not exist is deleted — unless submissions
   * wait in SUBMIT from before it was stored + 60 s (its submission may be among them: the walk stops there
   * until the next pass). At most 1,000 metadata messages per bucket and pass.
   */
  private async collectObjects(now: number, epoch: number): Promise<void> {
    const grace = this.settings.objectGcGraceMs;
    const ns = this.o.bus.names.namespace;
    let backlogSince: number | undefined | null = null;
    const oldestWaitingSubmission = async (): Promise<number | undefined> => {
      if (backlogSince === null) {
        const si = await this.o.bus.jsm.streams.info(this.o.bus.names.streams.submit);
        backlogSince = si.state.messages > 0 ? Date.parse(si.state.first_ts) : undefined;
      }
      return backlogSince;
    };
    for (const bucket of await this.payloads.buckets()) {
      const client = bucketClient(ns, bucket);
      if (client === undefined) continue;
      const start = await this.o.tasks.objectGcCheckpoint(bucket);
      let at = start;
      for (let n = 0; n < 1_000; n++) {
        const m = await this.payloads.metaAfter(bucket, at);
        if (!m || m.mtime > now - grace) break;
        if (!m.deleted && m.name !== '') {
          const taskId = m.name.split('/')[0] ?? '';
          const owner = TASK_ID_PATTERN.test(taskId) ? await this.o.tasks.attachObject(taskId, client, m.name, epoch) : 'none';
          if (owner === 'none' || owner === 'other') {
            const waiting = owner === 'none' ? await oldestWaitingSubmission() : undefined;
            if (waiting !== undefined && waiting <= m.mtime + 60_000) break;
            if (await this.payloads.delete(bucket, m.name)) this.objectsDeleted++;
            this.log.info({ bucket, object: m.name, reason: owner === 'none' ? 'no task' : "another client's task" }, 'unreferenced object deleted');
          }
        }
        at = m.seq;
      }
      if (at !== start) await this.o.tasks.setObjectGcCheckpoint(bucket, at);
    }
  }

  /**
   * Cleared (draining) limiters and pause-only ones whose pause ended are deleted once empty — nothing
   * waiting, no live permit, no pause ahead (limitRetire) — and their registry entry removed if it is still
   * the one retired (a pause registered meanwhile stays; decision 0020 §1.7).
   */
  private async retireLimiters(now: number): Promise<void> {
    const m = triadMetrics();
    const ns = this.o.bus.names.namespace;
    const seen = new Set<string>();
    for (const [agent, { entry, raw }] of await this.limits.entries()) {
      // The gauges of decision 0020 §6: what waits and what runs under each limit, from the leader.
      const s = await this.limits.stats(agent, now);
      m.limitWaiting.set({ namespace: ns, agent }, s.waiting);
      m.limitInFlight.set({ namespace: ns, agent }, s.inFlight);
      m.limitPaused.set({ namespace: ns, agent }, s.pausedUntil !== undefined && s.pausedUntil > now ? 1 : 0);
      seen.add(agent);
      const idle = 'draining' in entry || ('pausedUntil' in entry && entry.pausedUntil <= now);
      if (!idle) continue;
      const r = await this.limits.retire(agent, now);
      if (r.retired && (await this.limits.unregister(agent, raw))) {
        this.log.info({ agent }, 'dispatch limiter retired (cleared or its pause ended, nothing left in it)');
        this.o.tasks.limits?.expire();
        seen.delete(agent);
      }
    }
    for (const agent of this.gaugedLimits) {
      if (seen.has(agent)) continue;
      m.limitWaiting.remove({ namespace: ns, agent });
      m.limitInFlight.remove({ namespace: ns, agent });
      m.limitPaused.remove({ namespace: ns, agent });
    }
    this.gaugedLimits = seen;
  }

  /**
   * What an expiry asked of the limiters (decision 0020 §2.5): its queue items go to a scheduler as
   * queue_step commands; its dequeues are applied here, without grants (only schedulers start grants),
   * and a limiter left with steps to let go gets a pump_limit.
   */
  private limiterWork(taskId: string, epoch: number, x: Expiry, now: number): Promise<unknown>[] {
    const bus = this.o.bus;
    const work: Promise<unknown>[] = [];
    for (const [agent, r] of x.limiter ?? []) {
      for (const q of r.queue) {
        const cmd: SupervisorCommand = { type: 'queue_step', taskId, step: q.phase, kind: q.kind, ticket: q.ticket, epoch };
        work.push(publishDurable(bus, bus.names.subjects.command, encode(cmd), `${q.ticket}:queue:${now}`).then(() => void this.health.queueChecks++));
      }
      if (r.dequeue.length > 0) {
        work.push(
          this.limits.apply(agent, { dequeue: r.dequeue, noGrant: true }, now).then(async (reply) => {
            if (reply.reclaimed) triadMetrics().limitReclaimed.inc({ namespace: bus.names.namespace, agent }, reply.reclaimed);
            if (reply.waiting > 0 && reply.wakeAt !== undefined && reply.wakeAt <= now) {
              const cmd: SupervisorCommand = { type: 'pump_limit', agent, epoch };
              await publishDurable(bus, bus.names.subjects.command, encode(cmd));
              this.health.limitWakes++;
            }
          }),
        );
      }
    }
    return work;
  }

  /** One retention stage, leader only, fenced by the epoch; a failure waits for the next pass. */
  private async retention(stage: 'purge' | 'compaction' | 'objects', run: () => Promise<void>): Promise<void> {
    if (this.stopped || !this.leadership.isLeader()) return;
    try {
      await run();
    } catch (e) {
      if (isTriadError(e, 'STALE')) this.health.fencedWrites++;
      else this.log.warn({ err: errorMessage(e) }, `retention ${stage} failed; retrying next sweep`);
    }
  }

  /** Carries out what the transition decided for one expired step: its events, its log line, the retry commands. */
  private async act({ taskId, step, epoch, expiry: x, now }: ActionInput): Promise<void> {
    const bus = this.o.bus;
    // The transition's reply names the task's workflow and createdAt: no read of the record.
    countTaskEnd(bus.names.namespace, x.workflow ?? '', x.events, x.createdAt, now);
    const work: Promise<unknown>[] = [publishTaskEvents(bus, x.client, taskId, x.events.map((e) => toTaskEvent(taskId, e, now)), x.replyTo)];
    // Inside the action's span: the line carries the task's trace id (decision 0013).
    if (x.action === 'wake') this.log.info({ taskId, step, started: x.dispatch.map((d) => d.step) }, 'sleep ended');
    else if (x.action === 'admit') this.log.info({ taskId, started: x.dispatch.map((d) => d.step) }, 'admitted task started');
    else if (x.action === 'resend' || x.action === 'timeout') this.log.info({ taskId, step, op: x.dispatch.map((d) => d.child) }, x.action === 'timeout' ? 'child task timed out: cancelling it' : 'child operation sent again');
    else if (LADDER_ACTIONS.has(x.action)) this.log.info({ taskId, step, kind: x.kind, attempt: x.attempt, failureCount: x.failureCount, lastError: x.lastError }, `failure ladder: ${x.action}`);
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
      // A fan-out element's attempt names its element (decision 0019 §2.6): `<step>#<i>` in the message id.
      const cmd: SupervisorCommand = { type: 'retry_step', taskId, step: d.step, kind: d.kind, attempt: d.attempt, epoch, ...(d.item !== undefined ? { item: d.item } : {}) };
      const which = d.item !== undefined ? `${d.step}#${d.item}` : d.step;
      // A child step's operation (decision 0019 §2.6): its op and how many were sent name it, so a re-send
      // or a cancel after a start of the same attempt is not dropped as a repeat of the earlier command.
      const id = d.child !== undefined ? `${taskId}:${which}:${d.kind}:child-${d.child}:${d.attempt}:${d.sent ?? 0}` : `${taskId}:${which}:${d.kind}:retry:${d.attempt}`;
      work.push(publishDurable(bus, bus.names.subjects.command, encode(cmd), id));
    }
    work.push(...this.limiterWork(taskId, epoch, x, now));
    // Tasks this transition admitted (decision 0024): started here, each its own fenced transition.
    for (const id of x.admit ?? []) {
      work.push(
        this.o.tasks.admitAsLeader(id, now, epoch).then(
          (a) => (a.action === 'admit' ? this.handleAction({ taskId: id, step: ADMIT_STEP, epoch, expiry: a, now }) : undefined),
          (e: unknown) => this.log.warn({ err: errorMessage(e), taskId: id }, 'admitted task not started; its admission falls due at a later sweep'),
        ),
      );
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
          this.metrics.alertsPublished.inc();
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
      await this.o.tasks.reportSupervisorStatus(this.id, { ...h, at: Date.now() });
    } catch (e) {
      this.log.debug({ err: errorMessage(e) }, 'health not published');
    }
  }
}
