/**
 * Child processes of the benchmark: spawned, their output kept (the tail, for error messages), waited
 * on for readiness, stopped gracefully or killed, and never left behind however the benchmark ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { sleep } from './timing.js';

export interface Child {
  readonly name: string;
  readonly pid: number;
  readonly process: ChildProcess;
  /** Resolves (never rejects) with the exit code, or null when a signal ended it. */
  readonly exited: Promise<number | null>;
  isRunning(): boolean;
  /** The last lines of stdout and stderr together. */
  tail(lines?: number): string;
  /** The first line so far, or to come, matching `re`; rejects on timeout or when the process exits first. */
  waitForLine(re: RegExp, timeoutMs: number): Promise<string>;
  /** SIGTERM, then SIGKILL after `graceMs`: a graceful exit lets `--cpu-prof` write its profile. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL and wait for the exit: the abrupt death the recovery measurement needs. */
  kill(): Promise<void>;
}

const TAIL_LINES = 200;
/** Every child not yet seen exiting: the exit hook kills whatever is left here. */
const live = new Set<Child>();
let hookInstalled = false;

function installExitHook(): void {
  if (hookInstalled) return;
  hookInstalled = true;
  // Last resort (an uncaught error, process.exit): only synchronous work is possible here.
  process.on('exit', () => {
    for (const c of live) {
      try {
        c.process.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

export interface SpawnOptions {
  env?: Record<string, string>;
  cwd?: string;
}

export function spawnChild(name: string, command: string, args: readonly string[], o: SpawnOptions = {}): Child {
  installExitHook();
  const proc = spawn(command, args, { env: { ...process.env, ...o.env }, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiters = new Set<{ re: RegExp; resolve: (l: string) => void }>();
  let running = true;
  const onData = (stream: NodeJS.ReadableStream): void => {
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) {
        lines.push(line);
        if (lines.length > TAIL_LINES) lines.shift();
        for (const w of waiters) {
          if (w.re.test(line)) {
            waiters.delete(w);
            w.resolve(line);
          }
        }
      }
    });
  };
  if (proc.stdout) onData(proc.stdout);
  if (proc.stderr) onData(proc.stderr);
  const exited = new Promise<number | null>((resolve) => {
    proc.once('exit', (code) => {
      running = false;
      live.delete(child);
      resolve(code);
    });
    // A missing binary: 'error' without 'exit'.
    proc.once('error', (e) => {
      running = false;
      live.delete(child);
      lines.push(`spawn failed: ${e.message}`);
      resolve(127);
    });
  });

  const child: Child = {
    name,
    pid: proc.pid ?? -1,
    process: proc,
    exited,
    isRunning: () => running,
    tail: (n = 30) => lines.slice(-n).join('\n'),
    waitForLine: (re, timeoutMs) => {
      const seen = lines.find((l) => re.test(l));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<string>((resolve, reject) => {
        const w = { re, resolve: (l: string) => finish(() => resolve(l)) };
        const timer = setTimeout(() => finish(() => reject(new Error(`${name} printed no line matching ${String(re)} within ${timeoutMs} ms; last output:\n${child.tail()}`))), timeoutMs);
        const finish = (fn: () => void): void => {
          clearTimeout(timer);
          waiters.delete(w);
          fn();
        };
        waiters.add(w);
        void exited.then((code) => finish(() => reject(new Error(`${name} exited (code ${code}) before printing ${String(re)}; last output:\n${child.tail()}`))));
      });
    },
    stop: async (graceMs = 5_000) => {
      if (!running) return;
      proc.kill('SIGTERM');
      const done = await Promise.race([exited.then(() => true), sleep(graceMs).then(() => false)]);
      if (!done) {
        proc.kill('SIGKILL');
        await exited;
      }
    },
    kill: async () => {
      if (!running) return;
      proc.kill('SIGKILL');
      await exited;
    },
  };
  if (proc.pid !== undefined) live.add(child);
  return child;
}

/**
 * Waits until the actor is ready: its `<name> ready` line, or its health file (written right after
 * start-up succeeded — the ready line is logged at info, which `TRIAD_LOG_LEVEL=warn` hides).
 */
export async function waitReady(c: Child, readyLine: RegExp, healthFile: string | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let sawLine = false;
  const line = c.waitForLine(readyLine, timeoutMs).then(
    () => (sawLine = true),
    () => undefined,
  );
  while (Date.now() < deadline) {
    if (sawLine || (healthFile !== undefined && existsSync(healthFile))) return;
    if (!c.isRunning()) {
      await line;
      throw new Error(`${c.name} exited during start-up; last output:\n${c.tail()}`);
    }
    await sleep(25);
  }
  throw new Error(`${c.name} was not ready within ${timeoutMs} ms; last output:\n${c.tail()}`);
}

/** Stops every child still running, all at once (each SIGTERM then SIGKILL). */
export async function stopAll(graceMs = 5_000): Promise<void> {
  await Promise.all([...live].map((c) => c.stop(graceMs)));
}
