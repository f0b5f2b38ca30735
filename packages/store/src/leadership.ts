/**
 * Leader election in Redis for the supervisors: a lease key held by one candidate, renewed by its owner,
 * and an epoch that grows on every election. The holder must stop acting as soon as it cannot prove
 * its lease is still valid (measured on the monotonic clock from the moment it asked). A newly elected
 * leader raises every bucket's fence to its epoch before it leads (decision 0015).
 */
import { performance } from 'node:perf_hooks';
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

export class Leadership {
  private readonly keys: Keys;
  private epoch = 0;
  /** performance.now() until which our lease is certainly valid; 0 = not leading. */
  private validUntil = 0;
  /** The epoch to which this candidate raised every bucket's fence (decision 0015). */
  private fencedEpoch = 0;

  constructor(
    /** A dedicated connection, so renewals never queue behind sweep traffic. */
    private readonly redis: RedisClient,
    namespace: string,
    readonly id: string,
    readonly leaseMs: number,
    /** Replicas that must hold an election before the winner acts (WAIT, decision 0015); 0 = none. */
    private readonly waitReplicas = 0,
  ) {
    this.keys = keys(namespace);
  }

  /** Whether `waitReplicas` replicas acknowledged this connection's writes to the election's primary. */
  private async electionReplicated(): Promise<boolean> {
    if (this.waitReplicas === 0) return true;
    const replies = await this.redis
      .pipeline()
      .exists(this.keys.supervisorEpoch)
      .call('WAIT', this.waitReplicas, Math.max(1, Math.floor(this.leaseMs / 3)))
      .exec();
    const [err, acked] = replies?.[1] ?? [new Error('no reply'), 0];
    return !err && Number(acked) >= this.waitReplicas;
  }

  /** Acquires or renews; call every leaseMs/3. */
  async tick(): Promise<LeadershipState> {
    const asked = performance.now();
    // If this throws (Redis unreachable), leadership lapses when the last proven lease runs out.
    const reply = (await runScript(this.redis, 'leadership', [this.keys.supervisorLeader, this.keys.supervisorEpoch], [this.id, this.leaseMs])) as unknown[];
    if (Number(reply[0]) === 1) {
      const epoch = Number(reply[1]);
      if (epoch !== this.fencedEpoch) {
        // An epoch only a primary knows can be issued again after a failover. Leading anyway keeps expired
        // steps recovered while the primary has no replica; every supervisor transition still decides
        // from the state it reads atomically, so a second leader at the same epoch repeats nothing.
        const replicated = await this.electionReplicated();
        // Newly elected: raise every bucket's fence to our epoch before acting (decision 0015), so a deposed
        // leader is refused everywhere. A bucket that already saw a newer epoch means the election's INCR
        // was lost (a failover): move the counter past it and step down; the next election issues a new one.
        const newer = await raiseFences(this.redis, this.keys, epoch);
        if (newer > 0) {
          await runScript(this.redis, 'raiseEpoch', [this.keys.supervisorEpoch], [newer]);
          await runScript(this.redis, 'resign', [this.keys.supervisorLeader], [`${this.id}|${epoch}`]);
          this.validUntil = 0;
          return { leading: false, epoch: this.epoch };
        }
        this.fencedEpoch = epoch;
        this.epoch = epoch;
        this.validUntil = asked + this.leaseMs * 0.9;
        return replicated ? { leading: true, epoch } : { leading: true, epoch, replicated: false };
      }
      this.epoch = epoch;
      // Valid from when we asked, not from when we heard back; less a margin for Redis' clock.
      this.validUntil = asked + this.leaseMs * 0.9;
      return { leading: true, epoch: this.epoch };
    }
    this.validUntil = 0;
    return { leading: false, epoch: this.epoch, holder: String(reply[1]) };
  }

  /** True only while the lease is proven valid: a paused or partitioned leader stops acting at once. */
  isLeader(): boolean {
    return performance.now() < this.validUntil;
  }

  currentEpoch(): number {
    return this.epoch;
  }

  async resign(): Promise<void> {
    if (this.epoch === 0) return;
    this.validUntil = 0;
    await runScript(this.redis, 'resign', [this.keys.supervisorLeader], [`${this.id}|${this.epoch}`]).catch(() => undefined);
  }
}
