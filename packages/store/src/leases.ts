/**
 * Redlock leases on parts of a task: a scheduler's task lease for one operation, an agent's step lease
 * while it runs the step. A lease is never trusted alone: the transition scripts check the lease token
 * at the moment of every write (see docs/decisions/0006-leases-redlock.md).
 */
import Redlock, { type Lock } from 'redlock';
import type { Redis } from 'ioredis';
import { ErrorCode, TriadError } from '@triad/protocol';
import { keys, type Keys } from './keys.js';

export interface Lease {
  readonly key: string;
  readonly token: string;
  /** Epoch ms when the lease lapses unless extended. */
  readonly expiresAt: number;
  /** Extends by `ms` from now; throws if the lease was lost. */
  extend(ms: number): Promise<Lease>;
  /** Releases; never throws (an expired lease needs no release). */
  release(): Promise<void>;
}

export class Leases {
  private readonly keys: Keys;
  private readonly redlock: Redlock;

  /** `masters`: the Redis instances of the Redlock quorum; the state store must be one of them. */
  constructor(masters: readonly Redis[], namespace: string) {
    this.keys = keys(namespace);
    // Our callers decide what to do when a lease is busy; a few short, jittered retries absorb the
    // usual contention (two schedulers on one task's parallel results).
    this.redlock = new Redlock(masters, { driftFactor: 0.01, retryCount: 6, retryDelay: 15, retryJitter: 15, automaticExtensionThreshold: 0 });
    // Redlock reports per-client errors as events; a failed acquire still rejects.
    this.redlock.on('error', () => undefined);
  }

  /** The scheduler's lease on a task, for one operation. Throws TriadError UNAVAILABLE when busy. */
  async task(taskId: string, ms = 5_000): Promise<Lease> {
    return this.acquire(this.keys.lease(taskId, 'task'), ms, `task ${taskId}`);
  }

  /** The agent's lease on a running step. Throws TriadError UNAVAILABLE when another instance holds it. */
  async step(taskId: string, step: string, kind: string, ms: number): Promise<Lease> {
    return this.acquire(this.keys.lease(taskId, `step:${step}:${kind}`), ms, `step ${taskId}/${step}`, { retryCount: 0 });
  }

  private async acquire(key: string, ms: number, what: string, settings: { retryCount?: number } = {}): Promise<Lease> {
    let lock: Lock;
    try {
      lock = await this.redlock.acquire([key], Math.max(1, Math.floor(ms)), settings);
    } catch (e) {
      throw new TriadError(ErrorCode.Unavailable, `the lease on ${what} is held by another instance`, { cause: e });
    }
    return wrap(key, lock);
  }
}

function wrap(key: string, lock: Lock): Lease {
  return {
    key,
    token: lock.value,
    expiresAt: lock.expiration,
    extend: async (ms) => wrap(key, await lock.extend(Math.max(1, Math.floor(ms)))),
    release: async () => {
      await lock.release().catch(() => undefined);
    },
  };
}
