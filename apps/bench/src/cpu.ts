/**
 * CPU time of the processes taking part in a measurement (Linux /proc), so a figure can say which
 * process was saturated — without a profiler's overhead. Elsewhere it reports nothing.
 */
import { readFileSync } from 'node:fs';

/** Linux' USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s on every common platform. */
const TICKS_PER_SEC = 100;

export interface ProcessRef {
  name: string;
  pid: number;
}

/** User + system CPU ms of a process so far, or undefined where /proc is not there (or it has exited). */
function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(f[11]);
    const stime = Number(f[12]);
    return Number.isFinite(utime + stime) ? ((utime + stime) * 1000) / TICKS_PER_SEC : undefined;
  } catch {
    return undefined;
  }
}

export interface CpuShare {
  name: string;
  /** CPU ms used during the window. */
  cpuMs: number;
  /** Of one core over the window, in percent. */
  pctOfCore: number;
}

/** Starts a window; `end(wallMs)` returns each process' CPU use over it (this process included as "bench client"). */
export function cpuWindow(procs: readonly ProcessRef[]): { end(wallMs: number): CpuShare[] } {
  const start = new Map(procs.map((p) => [p.pid, cpuMs(p.pid)]));
  const self = process.cpuUsage();
  return {
    end: (wallMs) => {
      const out: CpuShare[] = [];
      for (const p of procs) {
        const a = start.get(p.pid);
        const b = cpuMs(p.pid);
        if (a === undefined || b === undefined) continue;
        out.push({ name: p.name, cpuMs: b - a, pctOfCore: (100 * (b - a)) / wallMs });
      }
      const d = process.cpuUsage(self);
      const ms = (d.user + d.system) / 1000;
      out.push({ name: 'bench client', cpuMs: ms, pctOfCore: (100 * ms) / wallMs });
      return out;
    },
  };
}

/** All the processes' CPU ms over the window divided by the units of work done in it. */
export function cpuPerUnit(shares: readonly CpuShare[], units: number): number {
  return shares.reduce((sum, c) => sum + c.cpuMs, 0) / units;
}

/**
 * The role a process plays, from the name the bench gave it: actors are numbered (`scheduler-1`,
 * `agent-noop-3`), cluster nodes too (`nats-d-0`); every agent process counts as `agents`.
 */
export function processRole(name: string): string {
  if (/^scheduler-\d+$/.test(name)) return 'scheduler';
  if (/^supervisor-\d+$/.test(name)) return 'supervisor';
  if (/^agent-.*-\d+$/.test(name)) return 'agents';
  if (name === 'nats-server' || /^nats-[a-z]+-?\d+$/.test(name)) return 'nats-server';
  if (name === 'redis-server' || /^redis-/.test(name)) return 'redis-server';
  return name;
}

/** CPU ms per unit of work of each role (processes of one role summed), in the order first seen. */
export function cpuPerUnitByRole(shares: readonly CpuShare[], units: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of shares) {
    const role = processRole(c.name);
    out[role] = (out[role] ?? 0) + c.cpuMs / units;
  }
  return out;
}
