/**
 * Turns the measurements into what the benchmark prints: one table of figures with their targets and
 * whether each is met, the profile summaries, and (with --json) one JSON object as the last line.
 */
import type { BaselineResult } from './baseline.js';
import type { FloorResult } from './floor.js';
import { cpuPerUnit, type CpuShare } from './cpu.js';
import type { LatencyResult } from './latency.js';
import type { MemoryResult } from './memory.js';
import type { ProfileSummary } from './profile.js';
import type { RecoveryResult } from './recovery.js';
import type { RttResult } from './rtt.js';
import type { ScalingResult } from './scaling.js';
import type { ScalingClusterResult } from './scaling-cluster.js';
import type { ScanResult } from './scan.js';
import type { ThroughputResult } from './throughput.js';
import { round } from './timing.js';

export interface Results {
  /** The options of the run (echoed in the JSON line). */
  config: Record<string, unknown>;
  baseline?: BaselineResult;
  /** The same baseline with nats.js' noAsyncTraces (not Triad's setting): for comparison only. */
  baselineNoAsyncTraces?: BaselineResult;
  throughput?: ThroughputResult;
  latency?: LatencyResult;
  rtt?: RttResult;
  /** The CPU a step costs without messages (floor.ts). */
  floor?: FloorResult;
  recovery?: RecoveryResult;
  scan?: ScanResult;
  memory?: MemoryResult;
  scaling?: ScalingResult;
  scalingCluster?: ScalingClusterResult;
  /** Supervisor retries counted during the load tests: 0 means no step expired while queued. */
  supervisorRetriesDuringLoad?: number;
  profiles?: ProfileSummary[];
}

interface Row {
  metric: string;
  value: string;
  target: string;
  met: string;
}

const fmt = (v: number, digits = 1): string => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');
const check = (ok: boolean): string => (ok ? 'yes' : 'NO');

/**
 * The throughput ratio no batching of messages could pass: baseline CPU per round trip ÷ the transition
 * floor per step. Only from runs long enough for CPU counted in 10 ms ticks (a second or more each), and
 * with redis-server's CPU in the floor.
 */
export function ratioCeiling(r: Results): number | undefined {
  const b = r.baseline;
  const f = r.floor;
  if (!b || !f || !f.includesRedis || b.elapsedMs < 1_000 || f.elapsedMs < 1_000) return undefined;
  return cpuPerUnit(b.cpu, b.roundTrips) / f.cpuMsPerStep;
}

export function ratioToBaseline(r: Results): number | undefined {
  if (!r.baseline || !r.throughput) return undefined;
  return r.throughput.stepsPerSec / r.baseline.roundTripsPerSec;
}

export function rows(r: Results): Row[] {
  const out: Row[] = [];
  const add = (metric: string, value: string, target = '', met = ''): void => void out.push({ metric, value, target, met });
  if (r.baseline) {
    add('baseline: JetStream round trips/s (2 processes, 2 work queues, client as connectBus)', fmt(r.baseline.roundTripsPerSec, 0));
    if (r.baselineNoAsyncTraces) add('baseline with noAsyncTraces (for comparison, not the ratio)', fmt(r.baselineNoAsyncTraces.roundTripsPerSec, 0));
    if (r.baseline.natsInPerRoundTrip !== undefined) add('baseline: NATS messages in / out per round trip', `${fmt(r.baseline.natsInPerRoundTrip, 1)} / ${fmt(r.baseline.natsOutPerRoundTrip ?? NaN, 1)}`);
  }
  if (r.throughput) {
    const t = r.throughput;
    add(`throughput: steps/s (${t.tasks} tasks × ${t.steps} no-op steps at once)`, fmt(t.stepsPerSec, 0));
    add('throughput: tasks/s', fmt(t.tasksPerSec, 0));
    if (t.work.natsInPerStep !== undefined) add('throughput: NATS messages in / out per step', `${fmt(t.work.natsInPerStep, 1)} / ${fmt(t.work.natsOutPerStep ?? NaN, 1)}`);
    add('throughput: Redis commands per step', fmt(t.work.redisTotalPerStep, 1));
    const ratio = ratioToBaseline(r);
    if (ratio !== undefined) add('ratio: throughput steps/s ÷ baseline round trips/s', fmt(ratio, 2), '≥ 1.0', check(ratio >= 1));
  }
  if (r.supervisorRetriesDuringLoad !== undefined) add('supervisor retries during the load tests (sanity: 0)', String(r.supervisorRetriesDuringLoad));
  if (r.latency) {
    const l = r.latency;
    add(`latency p50, ms (${l.samples} 3-step tasks one at a time)`, fmt(l.p50Ms, 2), '≤ 4', check(l.p50Ms <= 4));
    add('latency p99, ms', fmt(l.p99Ms, 2), '≤ 12', check(l.p99Ms <= 12));
    add('latency max, ms', fmt(l.maxMs, 2));
    add('latency legs p50, ms: submit → received / one step (request, agent, result, transition)', `${fmt(l.submitLegP50Ms, 2)} / ${fmt(l.stepLegP50Ms, 2)}`);
  }
  if (r.rtt) {
    add('round-trip floors p50, ms: Redis PING / JetStream publish-with-ack', `${fmt(r.rtt.redisPingP50Ms, 3)} / ${fmt(r.rtt.jsPublishP50Ms, 3)}`);
    add('hop floors p50, ms: JetStream publish → pull consumer has it / applyResult', `${fmt(r.rtt.jsDeliveryP50Ms, 3)} / ${fmt(r.rtt.applyResultP50Ms, 3)}`);
  }
  if (r.floor) {
    const f = r.floor;
    add(`transition floor: CPU ms per step of the state work alone, no messages (${f.tasks} tasks × ${f.steps}; ${f.cpu.map((c) => c.name).join(' + ')})`, fmt(f.cpuMsPerStep, 3));
    const ceiling = ratioCeiling(r);
    if (ceiling !== undefined) add('ratio ceiling: baseline CPU per round trip ÷ transition floor per step', fmt(ceiling, 2));
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

/** What the table cannot hold: Redis commands per step by type, and a finished task's record field by field. */
export function details(r: Results): string {
  const out: string[] = [];
  const cpu = (what: string, shares: readonly { name: string; pctOfCore: number }[]): void =>
    void out.push(`\nCPU during ${what}, % of one core (2 cores = 200%): ${shares.map((c) => `${c.name} ${fmt(c.pctOfCore, 0)}`).join(', ')}`);
  // CPU ms per unit of work: when both runs saturate the machine, their ratio is the throughput ratio,
  // and it moves much less than throughput does when other work shares the machine.
  const perUnit = (what: string, shares: readonly CpuShare[], units: number): void =>
    void out.push(`CPU ms per ${what}: total ${fmt(cpuPerUnit(shares, units), 3)} (${shares.map((c) => `${c.name} ${fmt(c.cpuMs / units, 3)}`).join(', ')})`);
  if (r.baseline) {
    cpu('the baseline', r.baseline.cpu);
    perUnit('baseline round trip', r.baseline.cpu, r.baseline.roundTrips);
  }
  if (r.floor) perUnit('step of the transition floor (no messages)', r.floor.cpu, r.floor.tasks * r.floor.steps);
  if (r.throughput) {
    cpu('the throughput run', r.throughput.cpu);
    perUnit('step', r.throughput.cpu, r.throughput.tasks * r.throughput.steps);
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

export function profileText(ps: readonly ProfileSummary[]): string {
  const out: string[] = [];
  for (const p of ps) {
    out.push(`\n${p.process}: busy ${fmt(p.busyMs, 0)} ms of ${fmt(p.wallMs, 0)} ms wall (GC ${fmt(p.gcMs, 0)} ms) — ${p.file}`);
    out.push('  by package (self time):');
    for (const g of p.packages) out.push(`    ${fmt(g.pct, 1).padStart(5)}%  ${fmt(g.selfMs, 0).padStart(6)} ms  ${g.name}`);
    out.push('  top functions (self time):');
    for (const f of p.functions) out.push(`    ${fmt(f.pct, 1).padStart(5)}%  ${fmt(f.selfMs, 0).padStart(6)} ms  ${f.name}  ${f.where}`);
    out.push("  Triad's own functions (inclusive of the synchronous work they call; async continuations count where they resume):");
    for (const f of p.triad) out.push(`    ${fmt(f.pct, 1).padStart(5)}%  ${fmt(f.selfMs, 0).padStart(6)} ms  ${f.name}  ${f.where}`);
  }
  return out.join('\n');
}

/** The flat JSON object printed as the last line with --json. */
export function jsonSummary(r: Results): Record<string, unknown> {
  const j: Record<string, unknown> = {};
  const c = r.config;
  j['config'] = { tasks: c['tasks'], steps: c['steps'], agents: c['agents'], mode: c['mode'], namespace: c['namespace'] };
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
  put('baseline_no_async_traces_roundtrips_per_sec', r.baselineNoAsyncTraces?.roundTripsPerSec, 1);
  put('baseline_nats_msgs_in_per_roundtrip', r.baseline?.natsInPerRoundTrip, 2);
  put('nats_msgs_in_per_step', r.throughput?.work.natsInPerStep, 2);
  if (r.baseline) put('baseline_cpu_ms_per_roundtrip', cpuPerUnit(r.baseline.cpu, r.baseline.roundTrips), 4);
  put('floor_cpu_ms_per_step', r.floor?.cpuMsPerStep, 4);
  put('ratio_ceiling', ratioCeiling(r), 3);
  if (r.throughput) put('cpu_ms_per_step', cpuPerUnit(r.throughput.cpu, r.throughput.tasks * r.throughput.steps), 4);
  put('redis_commands_per_step', r.throughput?.work.redisTotalPerStep, 2);
  put('redis_ping_p50_ms', r.rtt?.redisPingP50Ms, 4);
  put('js_publish_p50_ms', r.rtt?.jsPublishP50Ms, 4);
  put('js_delivery_p50_ms', r.rtt?.jsDeliveryP50Ms, 4);
  put('apply_result_p50_ms', r.rtt?.applyResultP50Ms, 4);
  put('latency_submit_leg_p50_ms', r.latency?.submitLegP50Ms);
  put('latency_step_leg_p50_ms', r.latency?.stepLegP50Ms);
  put('supervisor_retries_during_load', r.supervisorRetriesDuringLoad, 0);
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
