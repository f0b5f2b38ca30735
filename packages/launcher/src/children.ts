/**
 * Spawns child processes and makes sure they, and scratch dirs, go with this process however it ends:
 * the test harness' servers and actors, the bench's, and npm start's.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { sleep, WaitTimeoutError, withTimeout } from './wait.js';

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A spawned child plus the bookkeeping every caller needs. */
export interface TrackedChild {
  readonly process: ChildProcess;
  readonly pid: number;
  /**
   * Spawned `detached`: the child leads its own process group, and every signal goes to the whole
   * group — as a Ctrl-C in a terminal reaches `npm start` and everything it started.
   */
  readonly group: boolean;
  /** Settles (never rejects) once the process is gone. */
  readonly exit: Promise<ExitStatus>;
  /** Settles (never rejects) once the process is gone and its stdout/stderr are drained. */
  readonly closed: Promise<void>;
  isRunning(): boolean;
  /** How it ended, once it has; undefined while it runs. */
  exitStatus(): ExitStatus | undefined;
}

/** Children not yet seen exiting; the exit hooks SIGKILL whatever is left in here. */
const live = new Map<number, TrackedChild>();
/** Server directories not yet removed by a stop(); the exit hooks remove them. */
const scratchDirs = new Set<string>();
let hooksInstalled = false;
let signalHooks = true;
const signalListeners = new Map<NodeJS.Signals, () => void>();

/** Has `dir` removed when this process ends, unless `releaseScratchDir` says it is gone already. */
export function trackScratchDir(dir: string): void {
  if (dir.includes('\n')) throw new Error(`scratch dir names must not contain newlines: ${JSON.stringify(dir)}`);
  installExitHooks();
  scratchDirs.add(dir);
  reaper.send(`D${dir}`);
}

export function releaseScratchDir(dir: string): void {
  scratchDirs.delete(dir);
  reaper.send(`d${dir}`);
}

/**
 * Spawns `command` and waits until the OS has created the process (so a missing binary rejects here,
 * with its errno, instead of surfacing later as an 'error' event nobody listens to).
 */
export async function spawnTracked(
  command: string,
  args: readonly string[],
  options: SpawnOptions,
): Promise<TrackedChild> {
  installExitHooks();
  const child = spawn(command, args, options);
  // Bookkeeping starts before any await, so not even a process that exits at once slips past it.
  const pid = child.pid;
  let status: ExitStatus | undefined;
  const exit = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => {
      status = { code, signal };
      if (pid !== undefined) {
        live.delete(pid);
        reaper.send(`-${group ? -pid : pid}`);
      }
      resolve(status);
    });
  });
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const group = options.detached === true;
  const tracked: TrackedChild = {
    process: child,
    pid: pid ?? -1,
    group,
    exit,
    closed,
    isRunning: () => pid !== undefined && status === undefined,
    exitStatus: () => status,
  };
  if (pid !== undefined) {
    live.set(pid, tracked);
    reaper.send(`+${group ? -pid : pid}`);
  }
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
  } catch (error) {
    throw spawnError(command, options, error);
  }
  if (pid === undefined) throw new Error(`spawning ${command} produced no pid`);
  // Later errors (e.g. a failed kill) must not crash the process as unhandled 'error' events.
  child.on('error', () => {});
  return tracked;
}

/** Says what could not be started, and for ENOENT the two usual reasons. */
function spawnError(command: string, options: SpawnOptions, error: unknown): Error {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const hint =
    code === 'ENOENT'
      ? ` (not found: is it installed, and on PATH?${options.cwd === undefined ? '' : ` Does the working directory ${String(options.cwd)} exist?`})`
      : code === 'EACCES'
        ? ' (not executable)'
        : '';
  const message = error instanceof Error ? error.message : String(error);
  return new Error(`could not start ${command}: ${message}${hint}`, { cause: error });
}

/**
 * Sends `signal`, then SIGCONT when the signal needs the process to run: a SIGSTOPped process leaves
 * SIGTERM pending until it is continued, so stop() on a paused server would otherwise wait out its grace.
 */
export function sendSignal(child: TrackedChild, signal: NodeJS.Signals): void {
  if (!child.isRunning()) return;
  signalNow(child, signal);
  if (signal !== 'SIGKILL' && signal !== 'SIGSTOP' && signal !== 'SIGCONT' && signal !== 'SIGTSTP') {
    signalNow(child, 'SIGCONT');
  }
}

/** The child, or its whole process group; a process (or group) already gone is not an error. */
function signalNow(child: TrackedChild, signal: NodeJS.Signals): void {
  try {
    if (child.group) process.kill(-child.pid, signal);
    else child.process.kill(signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}

/** Sends `signal` and waits for the exit; rejects if the process is still there after `timeoutMs`. */
export async function killAndWait(
  child: TrackedChild,
  name: string,
  signal: NodeJS.Signals = 'SIGKILL',
  timeoutMs = 10_000,
): Promise<ExitStatus> {
  sendSignal(child, signal);
  return withTimeout(
    child.exit,
    timeoutMs,
    () => new WaitTimeoutError(`${name} (pid ${child.pid}) did not exit within ${timeoutMs}ms of ${signal}`),
  );
}

/** SIGTERM, a grace period, then SIGKILL: the polite stop that still always ends. */
export async function terminate(child: TrackedChild, graceMs: number): Promise<ExitStatus> {
  sendSignal(child, 'SIGTERM');
  const stillRunning = Symbol('still running');
  const first = await Promise.race([child.exit, sleep(graceMs).then(() => stillRunning)]);
  if (first !== stillRunning) return first as ExitStatus;
  sendSignal(child, 'SIGKILL');
  return child.exit;
}

/** Describes an exit for error messages: "code 1" or "signal SIGKILL". */
export function describeExit(status: ExitStatus): string {
  return status.signal !== null ? `signal ${status.signal}` : `code ${String(status.code)}`;
}

/** terminate() on every child still running, all at once: the end of a run, or its Ctrl-C. */
export async function terminateAll(graceMs: number): Promise<void> {
  await Promise.all([...live.values()].map((child) => terminate(child, graceMs)));
}

/**
 * Whether a SIGTERM, SIGINT or SIGHUP to this process SIGKILLs its children at once (the default: a
 * test worker has no shutdown of its own). A program that stops its children gracefully on those
 * signals itself (npm start, the bench) turns this off; the 'exit' hook and the reaper still catch
 * whatever its shutdown leaves behind.
 */
export function killChildrenOnSignals(enabled: boolean): void {
  signalHooks = enabled;
  if (!enabled) {
    for (const [signal, listener] of signalListeners) process.off(signal, listener);
    signalListeners.clear();
  } else if (hooksInstalled) {
    installSignalHooks();
  }
}

/** Synchronous on purpose: it runs in 'exit' and signal listeners, where nothing async completes. */
function cleanUpNow(): void {
  for (const child of live.values()) {
    try {
      signalNow(child, 'SIGKILL');
    } catch {
      // Best effort while this process is going down; the reaper covers what is left.
    }
  }
  for (const dir of scratchDirs) {
    try {
      // Retries cover ENOTEMPTY from a server that is still dying while the tree is removed.
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // Same: best effort.
    }
  }
}

/**
 * Three layers, because no single one covers every way a process (a vitest worker, say) ends:
 * - 'exit' runs on a normal exit or process.exit();
 * - vitest stops fork workers with SIGTERM, and a signal without listeners ends Node without 'exit',
 *   so SIGTERM/SIGINT/SIGHUP get a listener that kills the children and then re-raises the signal
 *   (unless killChildrenOnSignals(false): the program's own shutdown handles them);
 * - after 500 ms vitest escalates to SIGKILL, which no handler sees: the reaper process does.
 */
function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', cleanUpNow);
  if (signalHooks) installSignalHooks();
}

function installSignalHooks(): void {
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    if (signalListeners.has(signal)) continue;
    const onSignal = (): void => {
      cleanUpNow();
      // Re-raise only when we are the sole listener: otherwise someone else owns the shutdown.
      if (process.listenerCount(signal) === 1) {
        process.off(signal, onSignal);
        signalListeners.delete(signal);
        process.kill(process.pid, signal);
      }
    };
    signalListeners.set(signal, onSignal);
    process.on(signal, onSignal);
  }
}

/**
 * A /bin/sh process that outlives a SIGKILLed parent (a test worker, the bench, npm start). It reads
 * lines on stdin: "+pid"/"-pid" to watch/forget a child ("+-pgid": a process group), "Ddir"/"ddir" to
 * watch/forget a scratch dir.
 * When stdin closes (the parent is gone, however it died) it SIGKILLs the pids and removes the dirs
 * still listed. Started lazily, detached into its own process group (so a Ctrl-C to the parent's group
 * does not reach it) and unref'd, so it never holds the parent open. An inline script, not a file:
 * nothing to locate wherever this package is installed.
 */
const REAPER_SCRIPT = `
set -f
nl='
'
pids=''
dirs=''
while IFS= read -r line; do
  case "$line" in
    +*) pids="$pids \${line#+}" ;;
    -*) gone="\${line#-}"; rest=''; for p in $pids; do [ "$p" = "$gone" ] || rest="$rest $p"; done; pids="$rest" ;;
    D*) dirs="$dirs\${line#D}$nl" ;;
    d*) gone="\${line#d}"; rest=''; IFS="$nl"; for d in $dirs; do [ "$d" = "$gone" ] || rest="$rest$d$nl"; done; unset IFS; dirs="$rest" ;;
  esac
done
for p in $pids; do kill -9 "$p" 2>/dev/null; done
IFS="$nl"
for d in $dirs; do rm -rf -- "$d" 2>/dev/null || { sleep 1; rm -rf -- "$d" 2>/dev/null; }; done
exit 0
`;

class Reaper {
  #stdin: Socket | undefined;
  #broken = false;

  send(line: string): void {
    if (this.#broken) return;
    const stdin = this.#stdin ?? this.#start();
    stdin?.write(`${line}\n`);
  }
  #start(): Socket | undefined {
    try {
      const child = spawn('/bin/sh', ['-c', REAPER_SCRIPT], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
      // Best effort: if the reaper cannot run, the exit and signal hooks still cover the common cases.
      child.on('error', () => {
        this.#broken = true;
      });
      child.unref();
      const stdin = child.stdin;
      if (!(stdin instanceof Socket)) throw new Error('reaper stdin is not a pipe');
      stdin.on('error', () => {
        this.#broken = true;
      });
      stdin.unref();
      this.#stdin = stdin;
      return stdin;
    } catch {
      this.#broken = true;
      return undefined;
    }
  }
}

const reaper = new Reaper();
