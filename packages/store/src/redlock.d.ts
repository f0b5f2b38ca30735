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
    readonly resources: string[];
    readonly value: string;
    readonly expiration: number;
    constructor(redlock: Redlock, resources: string[], value: string, attempts: readonly Promise<unknown>[], expiration: number);
    release(): Promise<unknown>;
    extend(duration: number): Promise<Lock>;
  }

  export default class Redlock extends EventEmitter {
    constructor(clients: Iterable<Redis | Cluster>, settings?: Partial<Settings>);
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
  }
}
