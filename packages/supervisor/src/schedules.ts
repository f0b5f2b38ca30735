/**
 * The leader's schedule firing (decision 0019 §6.3): at each sweep it reads the due schedules (O(due)),
 * computes each one's due ticks with `@triad/core` (`dueTicks`: every tick of a failover's gap, only the
 * latest after an outage), reads the last task's status for `overlap: skip`, and fires each tick through
 * fireSchedule (fenced by the slot's epoch; the task id `sch:<name>:<tick>` comes from the schedule and the
 * tick, so whichever leader fires it, it is one task). The submissions the fires recorded are then
 * published from the outbox, message id `<client>:<taskId>` (the SDK's own), and removed from it.
 */
import { publishDurable, type Bus } from '@triad/bus';
import { dueTicks, nextTick, type ScheduleTiming } from '@triad/core';
import { encode, errorMessage, isTerminal, isTriadError, scheduleTaskId, type Submission } from '@triad/protocol';
import { intercept, type Interceptor, type Logger, type Next } from '@triad/telemetry';
import type { FireAction, ScheduleStore, StoredSchedule } from '@triad/store';
import type { SupervisorMetrics } from './telemetry.js';

/** Due schedules read per sweep (the rest at the next one, which then comes at once). */
export const DUE_PER_SWEEP = 100;
/** Outbox submissions published per sweep. */
const OUTBOX_PER_SWEEP = 500;

/** One tick to fire (or skip), as the leader decided it. */
export interface TickInput {
  schedule: StoredSchedule;
  tick: number;
  /** Ticks of an outage that will not fire (counted with this fire). */
  missed: number;
  skip: boolean;
  now: number;
  epoch: number;
}

export interface TickOutcome {
  action: FireAction;
  missed: number;
}

/** The catch-up window (decision 0019 §6.3): due ticks at most this old all fire; an older one means an outage. */
export function catchUpWindowMs(s: { leaseMs: number; intervalMs: number }): number {
  return Math.max(60_000, 2 * s.leaseMs + 2 * s.intervalMs);
}

/** The tick a schedule's task id names (`sch:<name>:<tick>`), if it is one. */
function tickOf(taskId: string): number | undefined {
  const t = Number(taskId.slice(taskId.lastIndexOf(':') + 1));
  return Number.isSafeInteger(t) ? t : undefined;
}

function timingOf(s: StoredSchedule): ScheduleTiming {
  return s.every !== undefined ? { every: s.every, anchor: s.anchor } : { cron: s.cron ?? '', timezone: s.timezone ?? 'UTC', anchor: s.anchor };
}

/** `triad_schedule_ticks_total{action}`: fired and skipped ticks, and the missed ones a fire recorded. */
export function countTick(m: SupervisorMetrics): Interceptor<TickInput, TickOutcome> {
  return async (input, next) => {
    const o = await next(input);
    if (o.action !== 'noop') {
      m.scheduleTicks(o.action, 1);
      if (o.missed > 0) m.scheduleTicks('missed', o.missed);
    }
    return o;
  };
}

export class ScheduleFiring {
  private readonly fireTick: Next<TickInput, TickOutcome>;
  /** The earliest next tick as last read (each leader sweep reads it to set its timer), and when the due index and the outbox were last read. */
  private knownNext: number | undefined;
  private lastDueRead = 0;
  private lastOutboxRead = 0;

  constructor(
    private readonly store: ScheduleStore,
    private readonly bus: Bus,
    private readonly log: Logger,
    metrics: SupervisorMetrics,
  ) {
    this.fireTick = intercept((i) => this.fire(i), countTick(metrics));
  }

  /** The earliest next tick of a schedule that is not paused: the leader wakes for it. */
  async nextTick(): Promise<number | undefined> {
    this.knownNext = await this.store.nextTick();
    return this.knownNext;
  }

  /**
   * Whether this sweep reads the due index: when the earliest next tick read since is due, and at least
   * once per interval anyway (a schedule created after that read) — a sweep woken for a step deadline
   * costs no schedule read.
   */
  private dueReadNeeded(now: number, intervalMs: number): boolean {
    return this.knownNext === undefined ? now - this.lastDueRead >= intervalMs : this.knownNext <= now || now - this.lastDueRead >= intervalMs;
  }

  /**
   * Fires the due ticks of the due schedules. Returns whether more was due than one pass takes (sweep
   * again at once). Throws TriadError STALE when a newer leader fenced the slot: this one is deposed.
   */
  async fireDue(now: number, epoch: number, catchUpMs: number, intervalMs: number, leading: () => boolean): Promise<{ behind: boolean; fired: number }> {
    if (!this.dueReadNeeded(now, intervalMs)) return { behind: false, fired: 0 };
    this.lastDueRead = now;
    const names = await this.store.due(now, DUE_PER_SWEEP);
    let behind = names.length >= DUE_PER_SWEEP;
    let fired = 0;
    for (const name of names) {
      if (!leading()) break;
      const s = await this.store.get(name);
      if (!s || s.paused) continue;
      try {
        const r = await this.fireSchedule(s, now, epoch, catchUpMs);
        behind ||= r.behind;
        fired += r.fired;
      } catch (e) {
        if (isTriadError(e, 'STALE')) throw e;
        this.log.warn({ err: errorMessage(e), schedule: name }, 'schedule not fired; trying again next sweep');
      }
    }
    // Ticks fired, or a schedule left due: the next sweep reads the index again (its timer read, if any, corrects this).
    if (names.length > 0) this.knownNext = now;
    return { behind, fired };
  }

  /** One schedule's due ticks, oldest first; behind when more were due than fire at once. */
  private async fireSchedule(s: StoredSchedule, now: number, epoch: number, catchUpMs: number): Promise<{ behind: boolean; fired: number }> {
    const timing = timingOf(s);
    // Ticks after the last one handled, and after the last resume (a paused period is not caught up).
    const from = Math.max(s.lastTick ?? 0, s.since ?? 0) || undefined;
    const due = dueTicks(timing, from, now, catchUpMs);
    let lastTaskId = s.lastTaskId;
    let missed = due.missed;
    let fired = 0;
    for (const tick of due.fire) {
      const skip = s.overlap === 'skip' && (await this.previousRunning(s, lastTaskId, now, catchUpMs));
      const o = await this.fireTick({ schedule: s, tick, missed, skip, now, epoch });
      if (o.action === 'noop') return { behind: false, fired };
      missed = 0;
      if (o.action === 'fired') {
        lastTaskId = scheduleTaskId(s.name, tick);
        fired++;
      }
      this.log.info({ schedule: s.name, tick, action: o.action, taskId: o.action === 'fired' ? lastTaskId : undefined, missed: o.missed }, `schedule tick ${o.action}`);
    }
    const last = due.fire.at(-1);
    return { behind: last !== undefined && (nextTick(timing, last) ?? Infinity) <= now, fired };
  }

  private async fire(i: TickInput): Promise<TickOutcome> {
    const s = i.schedule;
    const taskId = scheduleTaskId(s.name, i.tick);
    const submission: Submission = { taskId, workflow: s.workflow, submittedAt: i.now, ...(s.version !== undefined ? { version: s.version } : {}), ...(s.input !== undefined ? { input: s.input } : {}) };
    const r = await this.store.fire({
      name: s.name,
      generation: s.generation,
      tick: i.tick,
      taskId,
      submission: encode(submission),
      // The next tick to consider after this one: due already when more of a gap is left.
      nextTick: nextTick(timingOf(s), i.tick),
      missed: i.missed,
      skip: i.skip,
      now: i.now,
      epoch: i.epoch,
    });
    if (r.action === 'noop') this.log.debug({ schedule: s.name, tick: i.tick, reason: r.reason }, 'schedule tick not fired');
    return { action: r.action, missed: i.missed };
  }

  /**
   * Whether the schedule's last task still runs (overlap skip). A plain read of the task's bucket, an
   * input to the fire, not part of it: a task that ends in between costs one skipped tick, never a double
   * run. A task not there yet is still on its way to a scheduler (in the outbox, or fired within the
   * catch-up window); one older is gone (removed by retention, or refused at submission).
   */
  private async previousRunning(s: StoredSchedule, taskId: string | undefined, now: number, catchUpMs: number): Promise<boolean> {
    if (!taskId) return false;
    const status = await this.store.taskStatus(taskId);
    if (status !== undefined) return !isTerminal(status);
    if (await this.store.inOutbox(s.client, taskId)) return true;
    const tick = tickOf(taskId);
    return tick !== undefined && now - tick < catchUpMs;
  }

  /**
   * Publishes the submissions fired and not yet published (decision 0019 §6.3), each to its client's
   * submit subject with the SDK's message id; only what JetStream stored leaves the outbox. A repeat (a
   * crash before the removal, a deposed leader) is a duplicate to JetStream and to createTask.
   */
  async publishOutbox(now: number, fired: number, intervalMs: number): Promise<number> {
    // After a fire, and once per interval for what a crashed or deposed leader left (or a failed publish).
    if (fired === 0 && now - this.lastOutboxRead < intervalMs) return 0;
    this.lastOutboxRead = now;
    const pending = await this.store.outbox(OUTBOX_PER_SWEEP);
    if (pending.length === 0) return 0;
    const done: string[] = [];
    const sent = await Promise.allSettled(
      pending.map(async (p) => {
        await publishDurable(this.bus, this.bus.names.subjects.submit(p.client), p.bytes, `${p.client}:${p.taskId}`);
        done.push(p.field);
      }),
    );
    await this.store.published(done);
    const failed = sent.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    // Left over (a failed publish, or more than one pass takes): read again at the next sweep.
    if (failed || pending.length >= OUTBOX_PER_SWEEP) this.lastOutboxRead = 0;
    if (failed) this.log.warn({ err: errorMessage(failed.reason), unpublished: pending.length - done.length }, 'scheduled submissions not all published; retrying next sweep');
    return done.length;
  }
}
