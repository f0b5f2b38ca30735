/**
 * Starts Triad's actors as separate processes — the scheduler, the supervisor and agent hosts running
 * the bench agents — with the run's NATS, Redis and namespace, and waits until each is ready.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess, type StartedProcess } from '@triad/launcher';
import { sleep } from './timing.js';

/** The repository root (this file runs from apps/bench/dist). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const READY_TIMEOUT_MS = 30_000;

export interface ActorsOptions {
  natsUrl: string;
  redisUrl: string;
  namespace: string;
  tmpDir: string;
  logLevel?: string;
  /** More environment for every actor (e.g. TRIAD_REDIS_CLUSTER for the scaling-cluster mode). */
  env?: Record<string, string>;
}

export class Actors {
  private seq = 0;
  readonly started: StartedProcess[] = [];

  constructor(private readonly o: ActorsOptions) {
    mkdirSync(join(o.tmpDir, 'health'), { recursive: true });
  }

  private async start(label: string, readyName: string, script: string, args: string[], env: Record<string, string>): Promise<StartedProcess> {
    const name = `${label}-${++this.seq}`;
    const healthFile = join(this.o.tmpDir, 'health', `${name}.hb`);
    const child = await startProcess({
      name,
      args: [join(REPO_ROOT, script), ...args],
      cwd: REPO_ROOT,
      env: {
        NATS_URL: this.o.natsUrl,
        REDIS_URL: this.o.redisUrl,
        TRIAD_NAMESPACE: this.o.namespace,
        // warn: per-message logging must not cost CPU in a throughput measurement.
        TRIAD_LOG_LEVEL: this.o.logLevel ?? 'warn',
        TRIAD_HEALTH_FILE: healthFile,
        ...this.o.env,
        ...env,
      },
    });
    this.started.push(child);
    await waitReady(child, new RegExp(`${readyName} ready`), healthFile, READY_TIMEOUT_MS);
    return child;
  }

  scheduler(): Promise<StartedProcess> {
    return this.start('scheduler', 'scheduler', 'apps/scheduler/dist/main.js', [], {});
  }

  /** A supervisor; `compactAfterMs` sets TRIAD_COMPACT_AFTER_MS (unset: the service's default, 10 min). */
  supervisor(intervalMs: number, leaseMs: number, compactAfterMs?: number): Promise<StartedProcess> {
    return this.start(
      'supervisor',
      'supervisor',
      'apps/supervisor/dist/main.js',
      [],
      {
        TRIAD_SUPERVISOR_INTERVAL_MS: String(intervalMs),
        TRIAD_SUPERVISOR_LEASE_MS: String(leaseMs),
        ...(compactAfterMs !== undefined ? { TRIAD_COMPACT_AFTER_MS: String(compactAfterMs) } : {}),
      },
    );
  }

  /** One agent host process running the named bench agents. */
  agent(agents: readonly string[]): Promise<StartedProcess> {
    return this.start(`agent-${agents.join('+')}`, 'agent-host', 'apps/agent/dist/main.js', ['apps/bench/dist/bench-agents.js'], { BENCH_AGENTS: agents.join(',') });
  }

  async agents(agents: readonly string[], count: number): Promise<StartedProcess[]> {
    return Promise.all(Array.from({ length: count }, () => this.agent(agents)));
  }

  /** The actors still running, for CPU accounting. */
  running(): { name: string; pid: number }[] {
    return this.started.filter((c) => c.isRunning()).map((c) => ({ name: c.name, pid: c.pid }));
  }

  /** Stops every actor gracefully, all at once. */
  async stopAll(): Promise<void> {
    await Promise.all(this.started.map((c) => c.stop(10_000)));
  }
}

/**
 * Waits until the actor is ready: its `<name> ready` line, or its health file (written right after
 * start-up succeeded — the ready line is logged at info, which `TRIAD_LOG_LEVEL=warn` hides).
 */
async function waitReady(c: StartedProcess, readyLine: RegExp, healthFile: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let sawLine = false;
  // Rejects once the process has exited and its output is drained: awaited below, so the tail is complete.
  const line = c.waitForOutput(readyLine, timeoutMs).then(
    () => (sawLine = true),
    () => undefined,
  );
  while (Date.now() < deadline) {
    if (sawLine || existsSync(healthFile)) return;
    if (!c.isRunning()) {
      await line;
      const code = await c.exited;
      throw new Error(`${c.name} exited during start-up (${code === null ? 'killed by a signal' : `code ${code}`}); last output:\n${c.tail()}`);
    }
    await sleep(25);
  }
  throw new Error(`${c.name} was not ready within ${timeoutMs} ms; last output:\n${c.tail()}`);
}
