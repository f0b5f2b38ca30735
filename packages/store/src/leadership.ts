/**
 * Leader election for the supervisors (decision 0004): the leadership lease is a Redlock lock, taken with
 * retry and kept with Redlock's `using` (extended while held; its abort signal says the lease was lost),
 * on the state store or on several independent Redis instances (TRIAD_REDLOCK_URLS). Under that lease the
 * new leader raises the epoch — the fencing value every supervisor write carries — and every bucket's
 * fence to it (decision 0015). A lease alone is never trusted: the holder stops acting as soon as it
 * cannot prove its lease valid on the monotonic clock, and a deposed leader's writes are refused by the
 * epoch fences.
 */
import { performance } from 'node:perf_hooks';
import Redlock, { ExecutionError, type Lock, type RedlockAbortSignal, type Settings } from 'redlock';
import type { RedisClient } from './client.js';
import { keys, type Keys } from './keys.js';
import { runScript } from './scripts.js';
import { raiseFences } from './fence.js';

export interface LeadershipState {
  leading: boolean;
  epoch: number;
  /** The current holder (`id|epoch`) when another candidate leads. */
  holder?: string;
  /**
   * false: elected, but no replica acknowledged the election within the wait (a primary without a
   * replica, e.g. just after a failover): a failover now could issue this epoch again (decision 0015).
   */
  replicated?: false;
}

export interface LeadershipOptions {
  /** The state store (a dedicated connection, so the election never queues behind sweep traffic). */
  redis: RedisClient;
  /**
   * Independent Redis instances Redlock takes the lease on, by quorum (TRIAD_REDLOCK_URLS); default: the
   * state store alone. The epoch and the fences stay on the state store either way.
   */
  lockServers?: readonly RedisClient[];
  namespace: string;
  id: string;
  /** The lease: a new leader takes over within about this after the old one dies. */
  leaseMs: number;
  /** Replicas that must hold an election before the winner acts (WAIT, decision 0015); 0 = none. */
  waitReplicas?: number;
  /** Every change of state (elected, deposed, another seen leading). */
  onChange?: (state: LeadershipState) => void;
  /** A failure to reach Redis while campaigning or leading (the campaign goes on). */
  onError?: (err: unknown) => void;
}

/** The shortest lease: Redlock extends at a third of it and needs 100 ms of slack. */
export const MIN_LEASE_MS = 200;

/** Redlock's clock drift allowance (its default): drift = 1 % of the lease + 2 ms. */
const DRIFT_FACTOR = 0.01;

/**
 * Redlock that also records, on the monotonic clock, until when the last acquire or extension proves
 * the lock held (`using` keeps its lock to itself). Redlock's own expiration is wall-clock time.
 */
class ProvenRedlock extends Redlock {
  /** performance.now() until which the lock is certainly held; 0 = not held. */
  provenUntil = 0;

  override async acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock> {
    return this.proven(await super.acquire(resources, duration, settings));
  }

  override async extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock> {
    return this.proven(await super.extend(existing, duration, settings));
  }

  override async release(lock: Lock, settings?: Partial<Settings>): Promise<unknown> {
    this.provenUntil = 0;
    return super.release(lock, settings);
  }

  private proven(lock: Lock): Lock {
    // What remains of the validity Redlock computed from when it asked (drift already subtracted).
    this.provenUntil = performance.now() + (lock.expiration - Date.now());
    return lock;
  }
}

export class Leadership {
  readonly id: string;
  readonly leaseMs: number;
  private readonly keys: Keys;
  private readonly redis: RedisClient;
  private readonly redlock: ProvenRedlock;
  private readonly retryDelayMs: number;
  private epoch = 0;
  private leading = false;
  private signal: RedlockAbortSignal | undefined;
  private stopped = true;
  private campaign: Promise<void> | undefined;
  /** Wakes whatever the campaign is waiting for (a retry delay, the next refresh) — on stop. */
  private wake: (() => void) | undefined;
  /** Resolves start() once the first attempt is decided. */
  private decided: (() => void) | undefined;

  constructor(private readonly o: LeadershipOptions) {
    if (!(o.leaseMs >= MIN_LEASE_MS)) throw new RangeError(`the leadership lease must be at least ${MIN_LEASE_MS} ms (got ${o.leaseMs})`);
    this.id = o.id;
    this.leaseMs = Math.floor(o.leaseMs);
    this.redis = o.redis;
    this.keys = keys(o.namespace);
    // A candidate asks about ten times a lease: a new leader takes over within lease + ~1.5 of this.
    this.retryDelayMs = Math.max(20, Math.min(500, Math.floor(this.leaseMs / 10)));
    this.redlock = new ProvenRedlock(o.lockServers && o.lockServers.length > 0 ? [...o.lockServers] : [o.redis], {
      driftFactor: DRIFT_FACTOR,
      retryCount: 2,
      retryDelay: this.retryDelayMs,
      retryJitter: Math.floor(this.retryDelayMs / 2),
      // `using` extends when this much of the lease is left: every third of it, as the lease/3 renewal did.
      automaticExtensionThreshold: Math.min(Math.floor((this.leaseMs * 2) / 3), this.leaseMs - 100),
    });
    // Redlock reports each instance's failures as events; a lost quorum still rejects, or aborts `using`.
    this.redlock.on('error', () => undefined);
  }

  /**
   * Starts campaigning: leads whenever it holds the lease, until stop(). Resolves once the first attempt
   * is decided (leading, another leads, or Redis could not be reached).
   */
  start(): Promise<void> {
    if (!this.stopped) return Promise.resolve();
    this.stopped = false;
    return new Promise<void>((decided) => {
      this.decided = decided;
      this.campaign = this.run();
    });
  }

  private changed(state: LeadershipState): void {
    this.o.onChange?.(state);
    this.decided?.();
    this.decided = undefined;
  }

  private failed(err: unknown): void {
    this.o.onError?.(err);
    this.decided?.();
    this.decided = undefined;
  }

  /** Stops: a leader resigns (releases the lease and its record) so another takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.campaign;
    this.decided?.();
  }

  /** True only while the lease is proven valid: a paused or partitioned leader stops acting at once. */
  isLeader(): boolean {
    return this.leading && this.signal?.aborted !== true && performance.now() < this.redlock.provenUntil;
  }

  currentEpoch(): number {
    return this.epoch;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.redlock.using([this.keys.supervisorLock], this.leaseMs, (signal) => this.lead(signal));
      } catch (e) {
        // Not acquired within the retries: another candidate holds the lease.
        if (!(e instanceof ExecutionError)) this.failed(e);
      }
      if (this.stopped) break;
      await this.follow();
      await this.pause(this.retryDelayMs);
    }
  }

  /** Reports who leads while this candidate does not. */
  private async follow(): Promise<void> {
    try {
      const holder = await this.redis.get(this.keys.supervisorLeader);
      this.changed(holder ? { leading: false, epoch: this.epoch, holder } : { leading: false, epoch: this.epoch });
    } catch (e) {
      this.failed(e);
    }
  }

  /** Runs while the lease is held: raises the epoch and the fences, then leads until the lease is lost or stop(). */
  private async lead(signal: RedlockAbortSignal): Promise<void> {
    const epoch = Number(await runScript(this.redis, 'elect', [this.keys.supervisorLeader, this.keys.supervisorEpoch], [this.id, this.leaseMs, '']));
    // An epoch only a primary knows can be issued again after a failover. Leading anyway keeps expired
    // steps recovered while the primary has no replica; every supervisor transition still decides
    // from the state it reads atomically, so a second leader at the same epoch repeats nothing.
    const replicated = await this.electionReplicated();
    // Raise every bucket's fence to our epoch before acting (decision 0015), so a deposed leader is refused
    // everywhere. A bucket that already saw a newer epoch means the election's INCR was lost (a failover):
    // move the counter past it and step down; the next election issues a new one.
    const newer = await raiseFences(this.redis, this.keys, epoch);
    if (newer > 0) {
      await runScript(this.redis, 'raiseEpoch', [this.keys.supervisorEpoch], [newer]);
      await this.resign(epoch);
      return;
    }
    this.epoch = epoch;
    this.signal = signal;
    this.leading = true;
    this.changed(replicated ? { leading: true, epoch } : { leading: true, epoch, replicated: false });
    try {
      // Refresh the leader record (for operators and followers) at each third of the lease, until the
      // lease is lost (Redlock could not extend it) or the process stops.
      while (!this.stopped && !signal.aborted) {
        await this.pause(Math.max(50, Math.floor(this.leaseMs / 3)), signal);
        if (this.stopped || !this.isLeader()) continue;
        await runScript(this.redis, 'elect', [this.keys.supervisorLeader, this.keys.supervisorEpoch], [this.id, this.leaseMs, epoch]).catch((e: unknown) => this.failed(e));
      }
    } finally {
      this.leading = false;
      this.signal = undefined;
      this.changed({ leading: false, epoch });
      await this.resign(epoch);
    }
  }

  /** Removes the leader record if it is still ours (the lease itself is released by `using`). */
  private async resign(epoch: number): Promise<void> {
    await runScript(this.redis, 'resign', [this.keys.supervisorLeader], [`${this.id}|${epoch}`]).catch(() => undefined);
  }

  /** Whether `waitReplicas` replicas acknowledged this connection's writes to the election's primary. */
  private async electionReplicated(): Promise<boolean> {
    const n = this.o.waitReplicas ?? 0;
    if (n === 0) return true;
    const replies = await this.redis
      .pipeline()
      .exists(this.keys.supervisorEpoch)
      .call('WAIT', n, Math.max(1, Math.floor(this.leaseMs / 3)))
      .exec();
    const [err, acked] = replies?.[1] ?? [new Error('no reply'), 0];
    return !err && Number(acked) >= n;
  }

  /** Waits `ms`, or less if stop() is called or `signal` aborts. */
  private pause(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        if (this.wake === done) this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }
}
