/** Watches the actor processes through a storm: none may exit, be replaced, log a crash, or be cut off by NATS. */
import type { ActorProcess } from '../harness/index.js';
import type { Failure } from './checks.js';

/** Lines that mean a message crashed its handler, an error escaped, or a message was lost. */
export const CRASH_PATTERNS: readonly { re: RegExp; means: string }[] = [
  { re: /message handling crashed/, means: 'a message crashed the consumer loop' },
  { re: /handler failed after acknowledging/, means: 'a handler threw after acknowledging its message' },
  { re: /api request failed/, means: 'an API request failed with an internal error' },
  { re: /message dropped/, means: 'a message was dropped without a dead letter' },
  { re: /Uncaught|UnhandledPromiseRejection|triggerUncaughtException|FATAL ERROR/, means: 'an error escaped to the process' },
];

/**
 * Lines that are counted, not failed: a handler that threw is retried by redelivery, and a dead letter
 * NATS did not store in time is retried the same way (on a busy machine, a publish can time out); the
 * dead-letter and drain checks prove nothing was lost.
 */
export const RETRY_PATTERNS: readonly { re: RegExp; name: string }[] = [
  { re: /handler failed; message will be redelivered/, name: 'handlerRetries' },
  { re: /dead letter for .* could not be published/, name: 'deadLetterRetries' },
];

export interface ProcessReport {
  name: string;
  pid: number;
  running: boolean;
}

export class ProcessWatch {
  private readonly exited = new Map<string, number | null>();
  private readonly started: { p: ActorProcess; pid: number }[];

  constructor(processes: readonly ActorProcess[]) {
    this.started = processes.map((p) => ({ p, pid: p.pid }));
    for (const p of processes) void p.exited.then((code) => this.exited.set(p.name, code));
  }

  /** How often each retry pattern appeared in the actors' output. */
  retries(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const { name, re } of RETRY_PATTERNS) out[name] = this.started.reduce((sum, { p }) => sum + p.output().split('\n').filter((l) => re.test(l)).length, 0);
    return out;
  }

  report(): ProcessReport[] {
    return this.started.map(({ p, pid }) => ({ name: p.name, pid, running: !this.exited.has(p.name) && alive(pid) }));
  }

  /** `current` is the processes running now (a restart would show as a new pid or a new entry). */
  check(current: readonly ActorProcess[]): Failure[] {
    const failures: Failure[] = [];
    for (const { p, pid } of this.started) {
      if (this.exited.has(p.name)) failures.push({ check: 'processes', detail: `${p.name} (pid ${pid}) exited with code ${String(this.exited.get(p.name))}` });
      else if (!alive(pid)) failures.push({ check: 'processes', detail: `${p.name} (pid ${pid}) is no longer running` });
      const lines = p.output().split('\n');
      for (const { re, means } of CRASH_PATTERNS) {
        const hits = lines.filter((l) => re.test(l));
        if (hits.length > 0) failures.push({ check: 'processes', detail: `${p.name}: ${means}: ${hits.length} line(s), first: ${hits[0]!.slice(0, 400)}` });
      }
    }
    const before = new Set(this.started.map((s) => `${s.p.name}:${s.pid}`));
    for (const p of current) if (!before.has(`${p.name}:${p.pid}`)) failures.push({ check: 'processes', detail: `${p.name} now runs as pid ${p.pid}, not one the storm started with` });
    return failures;
  }
}

/**
 * Connections NATS closed on its side (a control line or payload over its limits, a slow consumer):
 * an actor whose connection is cut loses its in-flight work until it reconnects. Read from the
 * server's monitoring endpoint; a connection a client closed itself says "Client Closed".
 */
export async function serverClosedConnections(monitorUrl: string): Promise<Failure[]> {
  const res = await fetch(`${monitorUrl}/connz?state=closed&limit=1024`);
  const body = (await res.json()) as { connections?: { name?: string; reason?: string }[] };
  return (body.connections ?? [])
    .filter((c) => c.reason !== undefined && c.reason !== 'Client Closed')
    .map((c) => ({ check: 'processes' as const, detail: `NATS closed the connection of ${c.name ?? 'an unnamed client'}: ${c.reason}` }));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
