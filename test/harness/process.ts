// Starts a Triad actor (or any command) as a child process whose output a test can read and wait on.
import { describeExit, killAndWait, sendSignal, spawnTracked, terminate } from './children.js';
import { messageOf } from './errors.js';
import { OutputTail } from './output.js';
import type { Teardown } from './teardown.js';

export interface StartProcessOptions {
  /** Default: the running Node (process.execPath), so `args` are a script and its arguments. */
  command?: string;
  args: string[];
  /** Merged over process.env. */
  env?: Record<string, string>;
  cwd?: string;
  /** Names the process in errors and messages. */
  name: string;
  /** startProcess resolves once a line of output matches; without it, as soon as the process exists. */
  readyPattern?: RegExp;
  /** Default 30 s. */
  readyTimeoutMs?: number;
  /** Registered (its stop()) right after the spawn, before waiting for readyPattern. */
  teardown?: Teardown;
}

export interface ActorProcess {
  readonly name: string;
  readonly pid: number;
  /** Sends `signal` (default SIGKILL) and waits for the exit; rejects if it is still running 10 s later. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Sends `signal` and returns at once (e.g. SIGHUP, SIGUSR1); a paused process is woken to handle it. */
  signal(signal: NodeJS.Signals): void;
  /** SIGSTOP: the process freezes mid-work, its leases and heartbeats included. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGTERM, up to 5 s for a graceful exit, then SIGKILL. Idempotent. */
  stop(): Promise<void>;
  /** Exit code, or null when a signal ended it. Never rejects. */
  readonly exited: Promise<number | null>;
  /** Combined stdout and stderr so far (last 1 MB), assembled into lines. */
  output(): string;
  /**
   * The first line of output so far, or to come, matching `re` (default timeout 30 s). Rejects with the
   * tail of the output on timeout, or as soon as the process has exited without printing it.
   */
  waitForOutput(re: RegExp, timeoutMs?: number): Promise<string>;
}

const OUTPUT_CAP_CHARS = 1024 * 1024;
const STOP_GRACE_MS = 5_000;

export async function startProcess(opts: StartProcessOptions): Promise<ActorProcess> {
  const command = opts.command ?? process.execPath;
  const child = await spawnTracked(command, opts.args, {
    env: { ...process.env, ...opts.env },
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = new OutputTail(OUTPUT_CAP_CHARS);
  output.attach(child.process.stdout, 'stdout');
  output.attach(child.process.stderr, 'stderr');
  const label = `${opts.name} (pid ${child.pid})`;
  // Waiters fail on 'close' rather than 'exit' so the last lines are in, and in the error message.
  void Promise.all([child.exit, child.closed]).then(([status]) => {
    output.end(`exited with ${describeExit(status)}`, label);
  });

  let stopping: Promise<void> | undefined;
  const actor: ActorProcess = {
    name: opts.name,
    pid: child.pid,
    kill: async (signal = 'SIGKILL') => {
      await killAndWait(child, label, signal);
    },
    signal: (signal) => {
      sendSignal(child, signal);
    },
    pause: () => {
      if (!child.isRunning()) throw new Error(`cannot pause ${label}: it has exited`);
      sendSignal(child, 'SIGSTOP');
    },
    resume: () => {
      sendSignal(child, 'SIGCONT');
    },
    stop: () => {
      stopping ??= terminate(child, STOP_GRACE_MS).then(() => undefined);
      return stopping;
    },
    exited: child.exit.then((status) => status.code),
    output: () => output.text(),
    waitForOutput: (re, timeoutMs = 30_000) => output.waitForLine(re, timeoutMs, label),
  };
  opts.teardown?.add(() => actor.stop());

  if (opts.readyPattern !== undefined) {
    try {
      await output.waitForLine(opts.readyPattern, opts.readyTimeoutMs ?? 30_000, label);
    } catch (error) {
      await actor.stop().catch(() => undefined);
      throw new Error(`${opts.name} did not become ready: ${messageOf(error)}`, { cause: error });
    }
  }
  return actor;
}
