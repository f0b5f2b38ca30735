/**
 * Starts a process (a Triad actor, a server, any command) whose output the caller can read and wait on,
 * and stop gracefully or kill: the test harness' startProcess, and every child of the bench.
 */
import { describeExit, killAndWait, sendSignal, spawnTracked, terminate } from './children.js';
import { OutputTail } from './output.js';
import { messageOf } from './wait.js';

export interface StartProcessOptions {
  /** Default: the running Node (process.execPath), so `args` are a script and its arguments. */
  command?: string;
  args: string[];
  /** Merged over process.env, unless `inheritEnv` is false. */
  env?: Record<string, string>;
  /** false: the process gets `env` alone (e.g. a user's shell environment, without this process's variables). */
  inheritEnv?: boolean;
  cwd?: string;
  /** Names the process in errors and messages. */
  name: string;
  /** startProcess resolves once a line of output matches; without it, as soon as the process exists. */
  readyPattern?: RegExp;
  /** Default 30 s. */
  readyTimeoutMs?: number;
  /**
   * Start it in its own process group, and send every signal (stop, kill, SIGINT) to the whole group:
   * what a terminal's Ctrl-C does to a command like `npm start` and the processes it runs.
   */
  group?: boolean;
  /** Registered (its stop()) right after the spawn, before waiting for readyPattern: the harness' Teardown. */
  teardown?: { add(step: () => Promise<void>): void };
}

export interface StartedProcess {
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
  /**
   * SIGTERM, up to `graceMs` (default 5 s) for a graceful exit — e.g. for `--cpu-prof` to write its
   * profile — then SIGKILL. Idempotent: later calls return the first one's promise.
   */
  stop(graceMs?: number): Promise<void>;
  /** Exit code, or null when a signal ended it. Never rejects. */
  readonly exited: Promise<number | null>;
  isRunning(): boolean;
  /** Combined stdout and stderr so far (last 1 MB), assembled into lines. */
  output(): string;
  /** The last `maxChars` (default 4000) characters of the output, for error messages. */
  tail(maxChars?: number): string;
  /**
   * The first line of output so far, or to come, matching `re` (default timeout 30 s). Rejects with the
   * tail of the output on timeout, or as soon as the process has exited without printing it.
   */
  waitForOutput(re: RegExp, timeoutMs?: number): Promise<string>;
}

const OUTPUT_CAP_CHARS = 1024 * 1024;
const STOP_GRACE_MS = 5_000;

export async function startProcess(opts: StartProcessOptions): Promise<StartedProcess> {
  const command = opts.command ?? process.execPath;
  const child = await spawnTracked(command, opts.args, {
    env: opts.inheritEnv === false ? { ...opts.env } : { ...process.env, ...opts.env },
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    ...(opts.group === true ? { detached: true } : {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  }).catch((error: unknown) => {
    throw new Error(`${opts.name}: ${messageOf(error)}`, { cause: error });
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
  const started: StartedProcess = {
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
    stop: (graceMs = STOP_GRACE_MS) => {
      stopping ??= terminate(child, graceMs).then(() => undefined);
      return stopping;
    },
    exited: child.exit.then((status) => status.code),
    isRunning: () => child.isRunning(),
    output: () => output.text(),
    tail: (maxChars) => output.tail(maxChars),
    waitForOutput: (re, timeoutMs = 30_000) => output.waitForLine(re, timeoutMs, label),
  };
  opts.teardown?.add(() => started.stop());

  if (opts.readyPattern !== undefined) {
    try {
      await output.waitForLine(opts.readyPattern, opts.readyTimeoutMs ?? 30_000, label);
    } catch (error) {
      await started.stop().catch(() => undefined);
      throw new Error(`${opts.name} did not become ready: ${messageOf(error)}`, { cause: error });
    }
  }
  return started;
}
