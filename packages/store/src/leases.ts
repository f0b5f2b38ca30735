/**
 * A scheduler's lease on a task, for one operation: Redlock's single-instance algorithm run inside the
 * transition script it guards (`take_lease` in _common.lua: SET with a unique token and an expiry if free
 * or already ours, atomically with the write), and released by `releaseLeases.lua`, Redlock's
 * compare-and-delete, for many leases in one call per bucket. An operation lasts milliseconds, so the
 * lease is never extended. See docs/decisions/0006-leases-redlock.md; on a Redis Cluster the lease is a
 * single key on its task's slot, not a quorum over masters (decision 0015). (Agents hold no lease in
 * Redis: their step request's JetStream message is their lease, decision 0010. The supervisors' leadership
 * lease is a Redlock lock proper: leadership.ts.)
 */
import { randomBytes } from 'node:crypto';
import { isCluster, type RedisClient } from './client.js';
import { keys, type Keys } from './keys.js';
import { runScript } from './scripts.js';

/** What a transition needs to take a lease: the key, a token unique to this holder, and the duration. */
export interface LeaseClaim {
  readonly key: string;
  readonly token: string;
  readonly ms: number;
}

export class Leases {
  private readonly keys: Keys;
  /** Tokens are this process's random prefix plus a counter: unique per holder without a random draw each. */
  private readonly prefix = randomBytes(9).toString('base64url');
  private seq = 0;
  /** Releases waiting for the next flush (one script call releases them all). */
  private releasing: { claim: LeaseClaim; done(): void }[] = [];

  /** `redis`: the state store, where the transitions take the leases. */
  constructor(
    private readonly redis: RedisClient,
    namespace: string,
  ) {
    this.keys = keys(namespace);
  }

  /** The scheduler's lease on a task, for one operation (taken by the operation's transition). */
  task(taskId: string, ms = 5_000): LeaseClaim {
    return this.claim(this.keys.lease(taskId, 'task'), ms);
  }

  /**
   * Releases a claim whose transition may or may not have taken it (a no-op if it did not, or if this
   * process's next operation on the task took it over). Releases made in one turn of the event loop go
   * out as one script call at the end of it. Never throws: a lease not released lapses by its expiry.
   */
  release(claim: LeaseClaim): Promise<void> {
    return new Promise<void>((done) => {
      this.releasing.push({ claim, done });
      if (this.releasing.length === 1) setImmediate(() => void this.flushReleases());
    });
  }

  private async flushReleases(): Promise<void> {
    const batch = this.releasing;
    this.releasing = [];
    // On a cluster, one call per bucket: a script's keys must share a slot (decision 0015). A single
    // Redis takes them all in one call.
    const cluster = isCluster(this.redis);
    const bySlot = new Map<string, { claim: LeaseClaim; done(): void }[]>();
    for (const r of batch) {
      const tag = cluster ? hashTag(r.claim.key) : '';
      const list = bySlot.get(tag);
      if (list) list.push(r);
      else bySlot.set(tag, [r]);
    }
    await Promise.all(
      [...bySlot.values()].map(async (group) => {
        for (let i = 0; i < group.length; i += 500) {
          const part = group.slice(i, i + 500);
          await runScript(
            this.redis,
            'releaseLeases',
            part.map((r) => r.claim.key),
            part.map((r) => r.claim.token),
          ).catch(() => undefined);
          for (const r of part) r.done();
        }
      }),
    );
  }

  private claim(key: string, ms: number): LeaseClaim {
    return { key, token: `${this.prefix}.${(this.seq++).toString(36)}`, ms: Math.max(1, Math.floor(ms)) };
  }
}

/** A key's Redis Cluster hash tag (the text between its first `{` and the next `}`), or the key itself. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = open >= 0 ? key.indexOf('}', open + 1) : -1;
  return close > open + 1 ? key.slice(open + 1, close) : key;
}
