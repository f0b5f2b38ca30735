/**
 * Turns the measurements into what the benchmark prints: the peer table (Triad beside BullMQ and
 * Restate), one table of figures with their targets and whether each is met, and (with --json) one JSON
 * object as the last line.
 */
import type { BaselineResult } from './baseline.js';
import { cpuPerUnit, cpuPerUnitByRole, type CpuShare } from './cpu.js';
import type { FloorsResult } from './floors.js';
import type { LatencyResult } from './latency.js';
import type { MemoryResult } from './memory.js';
import type { PeerName, PeerResult } from './peers/peer.js';
import type { HandoverResult, RecoveryResult } from './recovery.js';
import type { SleepLatenessResult } from './sleep-lateness.js';
import type { ScalingResult } from './scaling.js';
import type { FairnessResult, LimitsResult } from './limits.js';
import type { ScalingClusterResult } from './scaling-cluster.js';
import type { ScanResult } from './scan.js';
import type { Durability } from './servers.js';
import type { ThroughputResult } from './throughput.js';
import { round } from './timing.js';

export interface Results {
  /** The options of the run (echoed in the JSON line). */
  config: Record<string, unknown>;
  baseline?: BaselineResult;
  throughput?: ThroughputResult;
  latency?: LatencyResult;
  /** A step leg's floors (two stored hops, a Redis round trip), measured in the same run. */
  floors?: FloorsResult;
  /** With --durable: what makes each acknowledged write survive a power cut. */
  durability?: Durability;
  /** The tools a user would pick instead, measured the same way in the same run (--peers). */
  peers?: PeerResult[];
  recovery?: RecoveryResult;
  handover?: HandoverResult;
  /** How late durable sleeps end (decision 0019). */
  sleep?: SleepLatenessResult;
  scan?: ScanResult;
  memory?: MemoryResult;
  scaling?: ScalingResult;
  scalingCluster?: ScalingClusterResult;
  /** What a dispatch limit costs a step (decision 0020 §9.5). */
  limits?: LimitsResult;
  /** How soon another key's tasks complete behind one key's line (decision 0020 §9.5). */
  limitsFairness?: FairnessResult;
  /** Supervisor retries counted during the load tests: 0 means no step expired while queued. */
  supervisorRetriesDuringLoad?: number;
}

interface Row {
  metric: string;
  value: string;
  target: string;
  met: string;
}

const fmt = (v: number, digits = 1): string => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');
const check = (ok: boolean): string => (ok ? 'yes' : 'NO');

export function ratioToBaseline(r: Results): number | undefined {
  if (!r.baseline || !r.throughput) return undefined;
  return r.throughput.stepsPerSec / r.baseline.roundTripsPerSec;
}

const peer = (r: Results, name: PeerName): PeerResult | undefined => r.peers?.find((p) => p.name === name);

/** Triad's figure ÷ the peer's, when both were measured. */
function vs(r: Results, name: PeerName, triad: number | undefined, of: (p: PeerResult) => number): number | undefined {
  const p = peer(r, name);
  return p && triad !== undefined ? triad / of(p) : undefined;
}

/** Issue #26's targets: on the default servers, and with --durable (where latency has none). */
export function targets(r: Results): { bullmqSteps: number; restateSteps?: number; p50?: number; p99?: number } {
  return r.durability ? { bullmqSteps: 1.0, restateSteps: 5 } : { bullmqSteps: 1.2, p50: 1.5, p99: 1.0 };
}

export const ratioToRestate = (r: Results): number | undefined => vs(r, 'restate', r.throughput?.stepsPerSec, (p) => p.stepsPerSec);
export const ratioToBullmq = (r: Results): number | undefined => vs(r, 'bullmq', r.throughput?.stepsPerSec, (p) => p.stepsPerSec);
export const latencyRatioToBullmq = (r: Results): number | undefined => vs(r, 'bullmq', r.latency?.p50Ms, (p) => p.latencyP50Ms);
export const latencyP99RatioToBullmq = (r: Results): number | undefined => vs(r, 'bullmq', r.latency?.p99Ms, (p) => p.latencyP99Ms);

/**
 * Triad beside each peer: steps/s of N tasks × S no-op steps at once, latency of 3-step tasks one at a
 * time, and CPU ms per step of every process taking part (servers and workers included). Undefined when
 * no peer was measured.
 */
export function peerTable(r: Results): string | undefined {
  if (!r.peers || r.peers.length === 0 || !r.throughput) return undefined;
  const t = r.throughput;
  const head = ['system', 'steps/s', 'p50 ms', 'p99 ms', 'CPU ms/step', 'Triad ÷ it, steps/s'];
  const lines: string[][] = [
    [
      `Triad (${t.tasks} tasks × ${t.steps} steps; 1 scheduler, ${String(r.config['agents'])} agent process(es))`,
      fmt(t.stepsPerSec, 0),
      fmt(r.latency?.p50Ms ?? NaN, 2),
      fmt(r.latency?.p99Ms ?? NaN, 2),
      fmt(cpuPerUnit(t.cpu, t.tasks * t.steps), 3),
      '',
    ],
    ...r.peers.map((p) => [p.label, fmt(p.stepsPerSec, 0), fmt(p.latencyP50Ms, 2), fmt(p.latencyP99Ms, 2), fmt(p.cpuMsPerStep, 3), fmt(t.stepsPerSec / p.stepsPerSec, 2)]),
  ];
  const w = head.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(w[i] ?? 0) : c.padStart(w[i] ?? 0))).join(' | ')} |`;
  const sep = `|${w.map((n, i) => (i === 0 ? '-'.repeat(n + 2) : `${'-'.repeat(n + 1)}:`)).join('|')}|`;
  const durable = durabilityLine(r);
  return [...(durable ? [durable, ''] : []), line(head), sep, ...lines.map(line), '', ...cpuByProcessLines(r)].join('\n');
}

export function rows(r: Results): Row[] {
  const out: Row[] = [];
  const add = (metric: string, value: string, target = '', met = ''): void => void out.push({ metric, value, target, met });
  if (r.baseline) {
    add('baseline: JetStream round trips/s (2 processes, 2 work queues, client as connectBus)', fmt(r.baseline.roundTripsPerSec, 0));
    if (r.baseline.natsInPerRoundTrip !== undefined) add('baseline: NATS messages in / out per round trip', `${fmt(r.baseline.natsInPerRoundTrip, 1)} / ${fmt(r.baseline.natsOutPerRoundTrip ?? NaN, 1)}`);
  }
  if (r.throughput) {
    const t = r.throughput;
    add(`throughput: steps/s (${t.tasks} tasks × ${t.steps} no-op steps at once)`, fmt(t.stepsPerSec, 0));
    add('throughput: tasks/s', fmt(t.tasksPerSec, 0));
    if (t.work.natsInPerStep !== undefined) add('throughput: NATS messages in / out per step', `${fmt(t.work.natsInPerStep, 1)} / ${fmt(t.work.natsOutPerStep ?? NaN, 1)}`);
    add('throughput: Redis commands per step', fmt(t.work.redisTotalPerStep, 1));
    const ratio = ratioToBaseline(r);
    // The physical floor: durable messages both ways plus durable state cannot beat bare round trips.
    if (ratio !== undefined) add('physical floor: throughput steps/s ÷ baseline round trips/s', fmt(ratio, 2));
    const tg = targets(r);
    const bull = ratioToBullmq(r);
    if (bull !== undefined) add('ratio: Triad steps/s ÷ BullMQ steps/s', fmt(bull, 2), `≥ ${fmt(tg.bullmqSteps, 1)}`, check(bull >= tg.bullmqSteps));
    const restate = ratioToRestate(r);
    if (restate !== undefined) add('ratio: Triad steps/s ÷ Restate (fsync) steps/s', fmt(restate, 2), tg.restateSteps !== undefined ? `≥ ${tg.restateSteps}` : '', tg.restateSteps !== undefined ? check(restate >= tg.restateSteps) : '');
  }
  if (r.supervisorRetriesDuringLoad !== undefined) add('supervisor retries during the load tests (sanity: 0)', String(r.supervisorRetriesDuringLoad));
  if (r.latency) {
    const l = r.latency;
    add(`latency p50, ms (${l.samples} 3-step tasks one at a time)`, fmt(l.p50Ms, 2));
    add('latency p99, ms', fmt(l.p99Ms, 2));
    const tg = targets(r);
    const p50 = latencyRatioToBullmq(r);
    if (p50 !== undefined) add('latency p50 ratio: Triad ÷ BullMQ', fmt(p50, 2), tg.p50 !== undefined ? `≤ ${fmt(tg.p50, 1)}` : '', tg.p50 !== undefined ? check(p50 <= tg.p50) : '');
    const p99 = latencyP99RatioToBullmq(r);
    if (p99 !== undefined) add('latency p99 ratio: Triad ÷ BullMQ', fmt(p99, 2), tg.p99 !== undefined ? `≤ ${fmt(tg.p99, 1)}` : '', tg.p99 !== undefined ? check(p99 <= tg.p99) : '');
    add('latency max, ms', fmt(l.maxMs, 2));
    add('latency legs p50, ms: submit → received / one step (request, agent, result, transition)', `${fmt(l.submitLegP50Ms, 2)} / ${fmt(l.stepLegP50Ms, 2)}`);
    if (r.floors) {
      const f = r.floors;
      add(
        `step leg p50 beside its floors, ms: leg / 2 × stored hop + Redis write = floor (${f.samples} of each, one at a time, same servers)`,
        `${fmt(l.stepLegP50Ms, 2)} / 2 × ${fmt(f.storedHopP50Ms, 3)} + ${fmt(f.redisRoundTripP50Ms, 3)} = ${fmt(f.stepLegFloorP50Ms, 2)}`,
      );
      add('step leg p50 ÷ its floor (what the processes add: wake-ups, decoding, the transition\'s work)', fmt(l.stepLegP50Ms / f.stepLegFloorP50Ms, 2));
    }
  }
  if (r.recovery) {
    const x = r.recovery;
    add(
      `recovery: kill → step done on retry, ms (${x.killToDoneMs.length} samples; budget ${x.budgetMs}, interval ${x.intervalMs}, lease ${x.leaseMs})`,
      x.killToDoneMs.map((v) => fmt(v, 0)).join(' / '),
    );
    if (x.killToRetryMs.length > 0) {
      const maxDecision = Math.max(...x.killToRetryMs);
      add('recovery: kill → supervisor retry decision, ms', x.killToRetryMs.map((v) => fmt(v, 0)).join(' / '));
      add('recovery: max kill → retry decision, ms', fmt(maxDecision, 0), `≤ ${x.boundMs} (budget + interval)`, check(maxDecision <= x.boundMs));
    }
    add('recovery: max kill → step done on retry, ms', fmt(x.maxMs, 0), `≤ ${x.boundMs} (budget + interval)`, check(x.maxMs <= x.boundMs));
  }
  if (r.handover) {
    const h = r.handover;
    add(`recovery: leader kill -9 → another supervisor leads, ms (${h.killToLeaderMs.length} samples; lease ${h.leaseMs})`, h.killToLeaderMs.map((v) => fmt(v, 0)).join(' / '));
    add('recovery: max leader kill → new leader, ms', fmt(h.maxMs, 0), `≤ ${h.boundMs} (lease + lease/3)`, check(h.maxMs <= h.boundMs));
  }
  if (r.sleep) {
    const x = r.sleep;
    const sorted = [...x.latenessMs].sort((a, b) => a - b);
    add(`sleep: wake time → sleep ended, ms (${x.samples} sleeps of ${x.sleepMs} ms; p50 / max)`, `${fmt(sorted[Math.floor(sorted.length / 2)] ?? 0, 0)} / ${fmt(x.maxMs, 0)}`, `≤ ${x.intervalMs} (one supervisor interval)`, check(x.maxMs <= x.intervalMs));
    add('sleep: never before its time', fmt(sorted[0] ?? 0, 0), '≥ 0', check((sorted[0] ?? 0) >= 0));
  }
  if (r.scan) {
    for (const s of r.scan.sizes) {
      add(`scan at ${s.finished.toLocaleString('en')} finished: index reads p50 / p90, ms (deadlines + finished + compact ZRANGEBYSCORE, ZCOUNT)`, `${fmt(s.probeP50Ms, 3)} / ${fmt(s.probeP90Ms, 3)}`);
      add(`scan at ${s.finished.toLocaleString('en')} finished: sweep p50, ms (${r.scan.liveExpired} expired steps)`, fmt(s.sweepP50Ms, 2));
      add(`scan at ${s.finished.toLocaleString('en')} finished: Redis time, probe / sweep, µs (commandstats)`, `${fmt(s.probeServerUs, 1)} / ${fmt(s.sweepServerUs, 0)}`);
    }
    const hi = r.scan.sizes[r.scan.sizes.length - 1];
    add('scan method', r.scan.method === 'interleaved' ? `one Redis per size, ${r.scan.rounds} rounds alternating` : `one Redis, sizes in turn, ${r.scan.rounds} rounds each`);
    if (hi) add(`scan: seeding ${hi.finished.toLocaleString('en')} finished tasks, s (replica ${hi.replicaBytes} B, real record ${hi.templateBytes} B)`, fmt(r.scan.sizes.reduce((a, x) => a + x.seedMs, 0) / 1000, 1));
    add('scan ratio, probe (largest ÷ smallest)', fmt(r.scan.probeRatio, 2), '≤ 1.2', check(r.scan.probeRatio <= 1.2));
    add('scan ratio, sweep (largest ÷ smallest)', fmt(r.scan.sweepRatio, 2), '≤ 1.2', check(r.scan.sweepRatio <= 1.2));
    add('scan ratio, Redis time, probe (largest ÷ smallest)', fmt(r.scan.probeServerRatio, 2), '≤ 1.2', check(r.scan.probeServerRatio <= 1.2));
    add('scan ratio, Redis time, sweep (largest ÷ smallest)', fmt(r.scan.sweepServerRatio, 2), '≤ 1.2', check(r.scan.sweepServerRatio <= 1.2));
  }
  if (r.memory) {
    const m = r.memory;
    const c = m.compacted;
    const u = m.uncompacted;
    add(`memory per finished 3-step task after compaction, bytes (used_memory Δ / ${m.tasks})`, fmt(c.usedMemoryPerTask, 0), '≤ 2048', check(c.usedMemoryPerTask <= 2048));
    add(`memory per task after compaction, bytes (MEMORY USAGE: hash ${fmt(c.hashBytes, 0)} + indexes ${fmt(c.indexBytesPerTask, 0)}; ${c.encoding})`, fmt(c.keyBytesPerTask, 0), '≤ 2048', check(c.keyBytesPerTask <= 2048));
    add(`memory per finished task before compaction (its first TRIAD_COMPACT_AFTER_MS), bytes (used_memory Δ)`, fmt(u.usedMemoryPerTask, 0));
    add(`memory per task before compaction, bytes (MEMORY USAGE: hash ${fmt(u.hashBytes, 0)} + indexes ${fmt(u.indexBytesPerTask, 0)}; ${u.encoding})`, fmt(u.keyBytesPerTask, 0));
    if (m.listpackBytes !== undefined) {
      add(
        `memory per task before compaction, same record as a listpack (config hash-max-listpack-value ${m.listpackValueLimit}), bytes (hash ${m.listpackBytes} + indexes)`,
        fmt(m.listpackBytes + u.indexBytesPerTask, 0),
      );
    }
    add(`compaction of ${m.tasks} tasks by the supervisor (TRIAD_COMPACT_AFTER_MS=0, process start included), ms`, fmt(m.compactionMs, 0));
  }
  if (r.scaling) {
    const s = r.scaling;
    const runs = (v: number[]): string => (v.length > 1 ? ` (runs ${v.map((x) => fmt(x, 0)).join(', ')})` : '');
    add(`scaling: io10 steps/s, 1 agent process, mean of ${s.repeats} (${s.tasks} tasks × ${s.steps})${runs(s.oneAgentRuns)}`, fmt(s.oneAgentStepsPerSec, 0));
    add(`scaling: io10 steps/s, 2 agent processes${runs(s.twoAgentsRuns)}`, fmt(s.twoAgentsStepsPerSec, 0));
    add('scaling: share of steps run by the busier of the 2 processes', s.busierShare.map((v) => `${fmt(100 * v, 0)}%`).join(', '));
    add('scaling ratio (2 ÷ 1)', fmt(s.ratio, 2), '≥ 1.8', check(s.ratio >= 1.8));
  }
  if (r.limits) {
    const l = r.limits;
    const runs = (limited: boolean): string => l.runs.filter((x) => x.limited === limited).map((x) => fmt(x.stepsPerSec, 0)).join(', ');
    add(`limits: steps/s unlimited, median of ${l.pairs} (${l.tasks} tasks × ${l.steps}; runs ${runs(false)})`, fmt(l.unlimited.stepsPerSec, 0));
    add(`limits: steps/s with ${l.agent} limited at a concurrency never reached (runs ${runs(true)})`, fmt(l.limited.stepsPerSec, 0));
    add('limits: limited ÷ unlimited steps/s (median of the pairs)', fmt(l.ratio, 2));
    add('limits: CPU ms per step, unlimited / limited (all processes)', `${fmt(l.unlimited.cpuMsPerStep, 3)} / ${fmt(l.limited.cpuMsPerStep, 3)}`);
    add('limits: Redis scripts (evalsha) per step, unlimited / limited', `${fmt(l.unlimited.evalshaPerStep, 2)} / ${fmt(l.limited.evalshaPerStep, 2)}`);
    add('limits: Redis commands per step, unlimited / limited (inside scripts included)', `${fmt(l.unlimited.redisTotalPerStep, 2)} / ${fmt(l.limited.redisTotalPerStep, 2)}`);
    add('limits: the commands a limited step adds, per step', l.extraCommands.slice(0, 8).map(([c, d]) => `${c} +${fmt(d, 1)}`).join(', '));
  }
  if (r.limitsFairness) {
    const f = r.limitsFairness;
    add(`limits fairness: ${f.bTasks} tasks of B complete behind ${f.aWaitingAtB} of A waiting (${f.agent}, per key 1), ms`, fmt(f.bCompleteMs, 0));
    add(`limits fairness: A's tasks (of ${f.aTasks}) not completed when B's last did`, String(f.aNotCompletedAtB));
  }
  return out;
}

export function table(r: Results): string {
  const rs = rows(r);
  const head: Row = { metric: 'metric', value: 'value', target: 'target', met: 'met' };
  const w = {
    metric: Math.max(...[head, ...rs].map((x) => x.metric.length)),
    value: Math.max(...[head, ...rs].map((x) => x.value.length)),
    target: Math.max(...[head, ...rs].map((x) => x.target.length)),
  };
  const line = (x: Row): string => `| ${x.metric.padEnd(w.metric)} | ${x.value.padStart(w.value)} | ${x.target.padEnd(w.target)} | ${x.met.padEnd(3)} |`;
  const sep = `|${'-'.repeat(w.metric + 2)}|${'-'.repeat(w.value + 1)}:|${'-'.repeat(w.target + 2)}|-----|`;
  return [line(head), sep, ...rs.map(line)].join('\n');
}

/** With --durable: what makes each acknowledged write survive a power cut (printed above the tables). */
export function durabilityLine(r: Results): string | undefined {
  return r.durability ? `Durable run (--durable): NATS ${r.durability.nats}; Redis ${r.durability.redis}.` : undefined;
}

/** Per system, CPU ms per step of each process (processes of one role summed), one line each. */
export function cpuByProcessLines(r: Results): string[] {
  const out: string[] = [];
  const line = (system: string, shares: readonly CpuShare[], units: number): void =>
    void out.push(`  ${system}: total ${fmt(cpuPerUnit(shares, units), 3)} — ${Object.entries(cpuPerUnitByRole(shares, units)).map(([role, ms]) => `${role} ${fmt(ms, 3)}`).join(', ')}`);
  if (r.throughput) line('Triad', r.throughput.cpu, r.throughput.tasks * r.throughput.steps);
  for (const p of r.peers ?? []) line(p.name, p.cpu, p.tasks * p.steps);
  return out.length > 0 ? ['CPU ms per step, by process (the bench client submits and listens for completions):', ...out] : [];
}

/** What the table cannot hold: Redis commands per step by type, and a finished task's record field by field. */
export function details(r: Results): string {
  const out: string[] = [];
  const cpu = (what: string, shares: readonly { name: string; pctOfCore: number }[]): void =>
    void out.push(`\nCPU during ${what}, % of one core (2 cores = 200%): ${shares.map((c) => `${c.name} ${fmt(c.pctOfCore, 0)}`).join(', ')}`);
  // CPU ms per unit of work: when both runs saturate the machine, their ratio is the throughput ratio,
  // and it moves much less than throughput does when other work shares the machine.
  const perUnit = (what: string, shares: readonly CpuShare[], units: number): void =>
    void out.push(`CPU ms per ${what}: total ${fmt(cpuPerUnit(shares, units), 3)} (${Object.entries(cpuPerUnitByRole(shares, units)).map(([role, ms]) => `${role} ${fmt(ms, 3)}`).join(', ')})`);
  if (r.baseline) {
    cpu('the baseline', r.baseline.cpu);
    perUnit('baseline round trip', r.baseline.cpu, r.baseline.roundTrips);
  }
  for (const p of r.peers ?? []) {
    cpu(`${p.name}'s throughput run`, p.cpu);
    perUnit(`${p.name} step`, p.cpu, p.tasks * p.steps);
    if (p.resentCalls > 0) out.push(`${p.name}: ${p.resentCalls} call(s) sent again after a failed connection or no answer in time — its figures include those waits; run again to compare`);
  }
  if (r.throughput) {
    cpu('the throughput run', r.throughput.cpu);
    perUnit('Triad step', r.throughput.cpu, r.throughput.tasks * r.throughput.steps);
    const w = r.throughput.work.redisPerStep;
    out.push(`\nRedis commands per step during the throughput run: ${Object.entries(w).sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c} ${n}`).join(', ')}`);
  }
  if (r.memory) {
    for (const [when, m] of [
      ['before compaction', r.memory.uncompacted],
      ['after compaction', r.memory.compacted],
    ] as const) {
      out.push(`\nA finished 3-step task's record ${when} (${m.encoding}, MEMORY USAGE ${fmt(m.hashBytes, 0)} B), field by field:`);
      for (const f of m.fields) out.push(`  ${f.field.padEnd(12)} ${String(f.bytes).padStart(5)} B  ${f.sample}`);
    }
  }
  if (r.scalingCluster) {
    const c = r.scalingCluster;
    out.push(`\nScaling on clusters (${c.note}):`);
    out.push('  setup    processes  steps/s  Redis cmds/step  NATS msgs in/step  Redis by command');
    for (const row of c.rows) {
      const by = Object.entries(row.redisByCommand).map(([k, v]) => `${k} ${v}`).join(', ');
      out.push(`  ${row.setup.padEnd(8)} ${String(row.processes).padStart(9)}  ${String(row.stepsPerSec).padStart(7)}  ${fmt(row.redisPerStep, 2).padStart(15)}  ${fmt(row.natsInPerStep, 2).padStart(17)}  ${by}`);
    }
    out.push(`  task creation on the cluster, p50: ${fmt(c.createP50Ms.noWait, 2)} ms without WAIT, ${fmt(c.createP50Ms.wait1, 2)} ms with WAIT 1`);
  }
  return out.join('\n');
}

/** The flat JSON object printed as the last line with --json. */
export function jsonSummary(r: Results): Record<string, unknown> {
  const j: Record<string, unknown> = {};
  const c = r.config;
  j['config'] = { tasks: c['tasks'], steps: c['steps'], agents: c['agents'], mode: c['mode'], namespace: c['namespace'], durable: r.durability !== undefined };
  if (r.durability) j['durability'] = { nats: r.durability.nats, redis: r.durability.redis, stream_replicas: r.durability.streamReplicas };
  const byRole = (shares: readonly CpuShare[], units: number): Record<string, number> =>
    Object.fromEntries(Object.entries(cpuPerUnitByRole(shares, units)).map(([k, v]) => [k, round(v, 4)]));
  const put = (k: string, v: number | undefined, digits = 3): void => {
    if (v !== undefined && Number.isFinite(v)) j[k] = round(v, digits);
  };
  put('baseline_roundtrips_per_sec', r.baseline?.roundTripsPerSec, 1);
  put('steps_per_sec', r.throughput?.stepsPerSec, 1);
  put('tasks_per_sec', r.throughput?.tasksPerSec, 1);
  put('ratio_to_baseline', ratioToBaseline(r));
  put('latency_p50_ms', r.latency?.p50Ms);
  put('latency_p99_ms', r.latency?.p99Ms);
  put('latency_max_ms', r.latency?.maxMs);
  put('baseline_nats_msgs_in_per_roundtrip', r.baseline?.natsInPerRoundTrip, 2);
  put('nats_msgs_in_per_step', r.throughput?.work.natsInPerStep, 2);
  if (r.baseline) put('baseline_cpu_ms_per_roundtrip', cpuPerUnit(r.baseline.cpu, r.baseline.roundTrips), 4);
  if (r.throughput) {
    put('cpu_ms_per_step', cpuPerUnit(r.throughput.cpu, r.throughput.tasks * r.throughput.steps), 4);
    j['cpu_ms_per_step_by_process'] = byRole(r.throughput.cpu, r.throughput.tasks * r.throughput.steps);
  }
  put('redis_commands_per_step', r.throughput?.work.redisTotalPerStep, 2);
  put('latency_submit_leg_p50_ms', r.latency?.submitLegP50Ms);
  put('latency_step_leg_p50_ms', r.latency?.stepLegP50Ms);
  put('latency_step_leg_p99_ms', r.latency?.stepLegP99Ms);
  if (r.floors) {
    put('floor_stored_hop_p50_ms', r.floors.storedHopP50Ms, 4);
    put('floor_stored_hop_p99_ms', r.floors.storedHopP99Ms, 4);
    put('floor_redis_rtt_p50_ms', r.floors.redisRoundTripP50Ms, 4);
    put('floor_redis_rtt_p99_ms', r.floors.redisRoundTripP99Ms, 4);
    put('floor_step_leg_p50_ms', r.floors.stepLegFloorP50Ms, 4);
    if (r.latency) put('step_leg_over_floor', r.latency.stepLegP50Ms / r.floors.stepLegFloorP50Ms);
  }
  put('supervisor_retries_during_load', r.supervisorRetriesDuringLoad, 0);
  if (r.peers && r.peers.length > 0) {
    const peers: Record<string, Record<string, unknown>> = {};
    for (const p of r.peers) {
      peers[p.name] = {
        steps_per_sec: round(p.stepsPerSec, 1),
        latency_p50_ms: round(p.latencyP50Ms, 3),
        latency_p99_ms: round(p.latencyP99Ms, 3),
        cpu_ms_per_step: round(p.cpuMsPerStep, 4),
        cpu_ms_per_step_by_process: byRole(p.cpu, p.tasks * p.steps),
        resent_calls: p.resentCalls,
      };
    }
    j['peers'] = peers;
    put('ratio_to_bullmq', ratioToBullmq(r));
    put('latency_ratio_to_bullmq', latencyRatioToBullmq(r));
    put('latency_p99_ratio_to_bullmq', latencyP99RatioToBullmq(r));
    put('ratio_to_restate', ratioToRestate(r));
    put('ratio_to_restate_nofsync', vs(r, 'restate-nofsync', r.throughput?.stepsPerSec, (p) => p.stepsPerSec));
  }
  if (r.recovery) {
    j['recovery_kill_to_done_ms'] = r.recovery.killToDoneMs.map((v) => round(v, 1));
    put('recovery_max_ms', r.recovery.maxMs, 1);
    put('recovery_bound_ms', r.recovery.boundMs, 0);
  }
  if (r.scan) {
    const lo = r.scan.sizes[0];
    const hi = r.scan.sizes[r.scan.sizes.length - 1];
    put('scan_finished_small', lo?.finished, 0);
    put('scan_finished_large', hi?.finished, 0);
    put('scan_probe_ms_small', lo?.probeP50Ms, 4);
    put('scan_probe_ms_large', hi?.probeP50Ms, 4);
    put('scan_sweep_ms_small', lo?.sweepP50Ms, 3);
    put('scan_sweep_ms_large', hi?.sweepP50Ms, 3);
    put('scan_probe_ratio', r.scan.probeRatio);
    put('scan_sweep_ratio', r.scan.sweepRatio);
    put('scan_probe_server_ratio', r.scan.probeServerRatio);
    put('scan_sweep_server_ratio', r.scan.sweepServerRatio);
    put('scan_seed_ms_large', hi?.seedMs, 0);
  }
  if (r.memory) {
    // After compaction: what a finished task costs for most of its retention time.
    put('memory_bytes_per_task', r.memory.compacted.usedMemoryPerTask, 0);
    put('memory_key_bytes_per_task', r.memory.compacted.keyBytesPerTask, 0);
    put('memory_bytes_per_task_uncompacted', r.memory.uncompacted.usedMemoryPerTask, 0);
    put('memory_key_bytes_per_task_uncompacted', r.memory.uncompacted.keyBytesPerTask, 0);
    put('memory_listpack_bytes_per_task_uncompacted', r.memory.listpackBytes !== undefined ? r.memory.listpackBytes + r.memory.uncompacted.indexBytesPerTask : undefined, 0);
    put('memory_compaction_ms', r.memory.compactionMs, 0);
  }
  if (r.scaling) {
    put('scaling_one_agent_steps_per_sec', r.scaling.oneAgentStepsPerSec, 1);
    put('scaling_two_agents_steps_per_sec', r.scaling.twoAgentsStepsPerSec, 1);
    put('scaling_ratio', r.scaling.ratio);
  }
  if (r.limits) {
    put('limits_unlimited_steps_per_sec', r.limits.unlimited.stepsPerSec, 1);
    put('limits_limited_steps_per_sec', r.limits.limited.stepsPerSec, 1);
    put('limits_ratio', r.limits.ratio);
    put('limits_evalsha_per_step_unlimited', r.limits.unlimited.evalshaPerStep);
    put('limits_evalsha_per_step_limited', r.limits.limited.evalshaPerStep);
    put('limits_cpu_ms_per_step_unlimited', r.limits.unlimited.cpuMsPerStep, 3);
    put('limits_cpu_ms_per_step_limited', r.limits.limited.cpuMsPerStep, 3);
  }
  if (r.limitsFairness) {
    put('limits_fairness_b_complete_ms', r.limitsFairness.bCompleteMs, 0);
    put('limits_fairness_a_not_completed', r.limitsFairness.aNotCompletedAtB, 0);
  }
  if (r.scalingCluster) {
    for (const row of r.scalingCluster.rows) {
      put(`scaling_${row.setup}_${row.processes}_steps_per_sec`, row.stepsPerSec, 0);
      put(`scaling_${row.setup}_${row.processes}_redis_per_step`, row.redisPerStep, 2);
      put(`scaling_${row.setup}_${row.processes}_nats_in_per_step`, row.natsInPerStep, 2);
    }
    put('cluster_create_p50_ms_no_wait', r.scalingCluster.createP50Ms.noWait, 2);
    put('cluster_create_p50_ms_wait1', r.scalingCluster.createP50Ms.wait1, 2);
  }
  return j;
}
