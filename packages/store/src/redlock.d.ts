// redlock@5.0.0-beta.2 ships typings that its package.json "exports" map does not expose to NodeNext
// resolution; this declares the part of its API Triad uses (checked against dist/index.d.ts).
declare module 'redlock' {
  import type { EventEmitter } from 'node:events';
  import type { Cluster, Redis } from 'ioredis';

  export interface Settings {
    readonly driftFactor: number;
    readonly retryCount: number;
    readonly retryDelay: number;
    readonly retryJitter: number;
    readonly automaticExtensionThreshold: number;
  }

  export class Lock {
    readonly redlock: Redlock;
    readonly resources: string[];
    readonly value: string;
    readonly expiration: number;
    release(): Promise<unknown>;
    extend(duration: number): Promise<Lock>;
  }

  /** Thrown when an operation found no quorum within its retries (e.g. another holds the lock). */
  export class ExecutionError extends Error {
    readonly attempts: readonly Promise<unknown>[];
  }

  /** The signal `using` hands its routine: aborted when an extension fails, with the reason in `error`. */
  export type RedlockAbortSignal = AbortSignal & { error?: Error };

  export default class Redlock extends EventEmitter {
    constructor(clients: Iterable<Redis | Cluster>, settings?: Partial<Settings>);
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
    extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock>;
    release(lock: Lock, settings?: Partial<Settings>): Promise<unknown>;
    using<T>(resources: string[], duration: number, settings: Partial<Settings>, routine: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
    using<T>(resources: string[], duration: number, routine: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  }
}
