// Runs one server binary on fixed ports with a private directory, with the faults tests inject: kill, pause, restart.
import { rm } from 'node:fs/promises';
import {
  describeExit,
  killAndWait,
  messageOf,
  OutputTail,
  releaseScratchDir,
  sendSignal,
  sleep,
  spawnTracked,
  terminate,
  trackScratchDir,
  withTimeout,
  type TrackedChild,
} from '@triad/launcher';
import type { Teardown } from './teardown.js';

/** Attempts at a first start (fresh ports each time) or a restart (same ports, after a pause). */
export const MAX_START_ATTEMPTS = 5;

/** What a test can do to a server the harness started: the fault injections and the lifecycle. */
export interface ServerControl {
  pid(): number | undefined;
  /** SIGKILL and wait for the exit: a crash. */
  kill(): Promise<void>;
  /** SIGSTOP: connections hang instead of failing. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** Any other signal. */
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM and wait if running, then start again on the same port and data and wait until ready. */
  restart(): Promise<void>;
  /** SIGTERM, wait, remove the data. Idempotent; the server cannot be restarted afterwards. */
  stop(): Promise<void>;
  /** Tail of its stdout/stderr, with a harness line at every (re)start. */
  log(): string;
}
const STOP_GRACE_MS = 10_000;
const LOG_CAP_CHARS = 256 * 1024;
const PORT_IN_USE = /address already in use/i;

/** What differs between nats-server and redis-server; everything else is ManagedServer. */
export interface ServerDefinition<P> {
  /** 'nats-server' or 'redis-server', for messages. */
  readonly kind: string;
  readonly binary: string;
  readonly readyTimeoutMs: number;
  allocatePorts(): Promise<P>;
  args(ports: P, dir: string): string[];
  /**
   * One readiness probe; true once *this* process (pid) serves on `ports`. Checking identity matters:
   * if another process grabbed the port first, it may answer while ours is still failing to bind.
   */
  probe(ports: P, pid: number): Promise<boolean>;
}

type LaunchResult = { ok: true } | { ok: false; reason: string; portInUse: boolean };

export class ManagedServer<P> {
  readonly dir: string;
  readonly #def: ServerDefinition<P>;
  readonly #log = new OutputTail(LOG_CAP_CHARS);
  #ports: P | undefined;
  #current: TrackedChild | undefined;
  #starting: Promise<unknown> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(def: ServerDefinition<P>, dir: string) {
    this.#def = def;
    this.dir = dir;
    trackScratchDir(dir);
  }

  get ports(): P {
    if (this.#ports === undefined) throw new Error(`${this.#def.kind} has not started`);
    return this.#ports;
  }

  /** The lifecycle and fault controls a test gets, bound to this server. */
  controls(): ServerControl {
    return {
      pid: () => this.pid(),
      kill: () => this.kill(),
      pause: () => this.pause(),
      resume: () => this.resume(),
      signal: (signal) => this.signal(signal),
      restart: () => this.restart(),
      stop: () => this.stop(),
      log: () => this.log(),
    };
  }

  pid(): number | undefined {
    return this.#current?.isRunning() === true ? this.#current.pid : undefined;
  }

  log(): string {
    return this.#log.text();
  }

  /**
   * Starts the server for a test: registers its stop with `teardown` first, and on a failed start stops
   * what was left before rethrowing.
   */
  async launch(teardown?: Teardown): Promise<void> {
    teardown?.add(() => this.stop());
    try {
      await this.start();
    } catch (error) {
      await this.stop().catch(() => undefined);
      throw error;
    }
  }

  /** First start: a port can be taken between freePort() and the bind, so retry on fresh ports. */
  async start(): Promise<void> {
    await this.#exclusive(async () => {
      const failures: string[] = [];
      for (let attempt = 1; attempt <= MAX_START_ATTEMPTS; attempt++) {
        const ports = await this.#def.allocatePorts();
        const result = await this.#launch(ports, attempt);
        if (result.ok) {
          this.#ports = ports;
          return;
        }
        failures.push(`attempt ${attempt} (ports ${JSON.stringify(ports)}): ${result.reason}`);
        if (!result.portInUse) break;
      }
      throw this.#startError('failed to start', failures);
    });
  }

  /** Stops the server if it runs (SIGTERM, wait) and starts it again on the same ports and directory. */
  async restart(): Promise<void> {
    await this.#exclusive(async () => {
      const ports = this.ports;
      if (this.#current?.isRunning() === true) await terminate(this.#current, STOP_GRACE_MS);
      const failures: string[] = [];
      for (let attempt = 1; attempt <= MAX_START_ATTEMPTS; attempt++) {
        const result = await this.#launch(ports, attempt);
        if (result.ok) return;
        failures.push(`attempt ${attempt}: ${result.reason}`);
        if (!result.portInUse) break;
        // The URL must not change, so wait for whoever holds the port (often a brief freePort() probe) to let go.
        await sleep(100 * attempt);
      }
      throw this.#startError(`failed to restart on ${JSON.stringify(ports)}`, failures);
    });
  }

  /** SIGKILL, as in a crash: no shutdown, nothing flushed that the server had not already written. */
  async kill(): Promise<void> {
    if (this.#current?.isRunning() === true) await killAndWait(this.#current, this.#def.kind, 'SIGKILL');
  }

  /** SIGSTOP: the port still accepts connections (the kernel does that) but nothing answers. */
  pause(): void {
    sendSignal(this.#running('pause'), 'SIGSTOP');
  }

  resume(): void {
    sendSignal(this.#running('resume'), 'SIGCONT');
  }

  signal(signal: NodeJS.Signals): void {
    sendSignal(this.#running(`send ${signal} to`), signal);
  }

  /** SIGTERM (then SIGKILL after a grace period), and remove the directory. Idempotent, and final. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const errors: string[] = [];
    // A start in progress spawns nothing more once #stopping is set; killing its child makes it give up now
    // (a teardown after a failed setup should not wait out a readiness timeout).
    if (this.#starting !== undefined) {
      if (this.#current?.isRunning() === true) sendSignal(this.#current, 'SIGKILL');
      await this.#starting.catch(() => undefined);
    }
    if (this.#current?.isRunning() === true) {
      try {
        await terminate(this.#current, STOP_GRACE_MS);
      } catch (error) {
        errors.push(messageOf(error));
      }
    }
    try {
      await rm(this.dir, { recursive: true, force: true, maxRetries: 3 });
      releaseScratchDir(this.dir);
    } catch (error) {
      errors.push(`removing ${this.dir}: ${messageOf(error)}`);
    }
    if (errors.length > 0) throw new Error(`stopping ${this.#def.kind}: ${errors.join('; ')}`);
  }

  /** Start and restart must not overlap each other or a stop. */
  async #exclusive(work: () => Promise<void>): Promise<void> {
    if (this.#stopping !== undefined) throw new Error(`${this.#def.kind} was stopped; start a new one`);
    if (this.#starting !== undefined) throw new Error(`${this.#def.kind} is already starting`);
    const running = work();
    this.#starting = running;
    try {
      await running;
    } finally {
      this.#starting = undefined;
    }
  }

  #running(action: string): TrackedChild {
    const current = this.#current;
    if (current?.isRunning() !== true) throw new Error(`cannot ${action} ${this.#def.kind}: it is not running`);
    return current;
  }

  async #launch(ports: P, attempt: number): Promise<LaunchResult> {
    if (this.#stopping !== undefined) return { ok: false, reason: 'stopped while starting', portInUse: false };
    const mark = this.#log.mark();
    const args = this.#def.args(ports, this.dir);
    const child = await spawnTracked(this.#def.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#current = child;
    this.#log.note(`--- harness: started ${this.#def.kind} pid ${child.pid} (attempt ${attempt}): ${args.join(' ')} ---`);
    this.#log.attach(child.process.stdout, `${child.pid}:out`);
    this.#log.attach(child.process.stderr, `${child.pid}:err`);
    if (this.#stopping !== undefined) {
      await killAndWait(child, this.#def.kind);
      return { ok: false, reason: 'stopped while starting', portInUse: false };
    }

    const deadline = Date.now() + this.#def.readyTimeoutMs;
    let lastProbeError = '';
    while (Date.now() < deadline) {
      if (!child.isRunning()) {
        const status = await child.exit;
        // 'exit' can come before the last output is read; the port-in-use line is often exactly that output.
        await withTimeout(child.closed, 2_000, () => new Error('output not drained')).catch(() => undefined);
        const printed = this.#log.linesSince(mark);
        return {
          ok: false,
          reason: `exited with ${describeExit(status)} before it was ready`,
          portInUse: printed.some((line) => PORT_IN_USE.test(line)),
        };
      }
      try {
        if (await this.#def.probe(ports, child.pid)) return { ok: true };
        lastProbeError = 'answered, but not (yet) as the process the harness started';
      } catch (error) {
        lastProbeError = messageOf(error);
      }
      await sleep(50);
    }
    await killAndWait(child, this.#def.kind).catch(() => undefined);
    return {
      ok: false,
      reason: `not ready within ${this.#def.readyTimeoutMs}ms (last probe: ${lastProbeError || 'none'})`,
      portInUse: false,
    };
  }

  #startError(what: string, failures: string[]): Error {
    return new Error(
      `${this.#def.kind} ${what} (${failures.join('; ')}); data in ${this.dir}; log tail:\n${this.#log.tail()}`,
    );
  }
}
