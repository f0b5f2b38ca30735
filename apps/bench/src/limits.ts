/**
 * `--mode limits` (decision 0020 §9.5): what a dispatch limit costs a step. The same 3-step no-op tasks
 * run unlimited and with their agent type limited at a concurrency it never reaches (every step then
 * queues, is granted and started through the limiter: `startQueued` and two limiter scripts more per
 * attempt), in alternating pairs so that the machine's drift hits both alike: steps/s, CPU ms per step of
 * each process, and Redis commands per step — `evalsha` is where the extra scripts show.
 */
import type { TriadClient } from '@triad/client';
import type { Completions } from './completions.js';
import type { Counters } from './counters.js';
import type { ProcessRef } from './cpu.js';
import { measureThroughput, type ThroughputResult } from './throughput.js';
import { sleep } from './timing.js';

/** Far above what one run can have in flight: the limiter grants every step at once, so only its cost shows. */
const NEVER_REACHED = 100_000;
/** A limit set or cleared reaches every scheduler within TRIAD_LIMITS_REFRESH_MS (1 s by default). */
const PROPAGATION_MS = 1_300;

export interface LimitsRun {
  limited: boolean;
  stepsPerSec: number;
  /** CPU ms per step, summed over Triad's processes (scheduler, supervisor, agents) and the servers. */
  cpuMsPerStep: number;
  evalshaPerStep: number;
  redisTotalPerStep: number;
  /** Redis commands per step by command (those called inside scripts included: INFO commandstats counts them). */
  redisPerStep: Record<string, number>;
}

export interface LimitsResult {
  agent: string;
  tasks: number;
  steps: number;
  pairs: number;
  runs: LimitsRun[];
  /** Medians over the pairs. */
  unlimited: Omit<LimitsRun, 'limited' | 'redisPerStep'>;
  limited: Omit<LimitsRun, 'limited' | 'redisPerStep'>;
  /** The commands a limited step makes more than an unlimited one, per step (the last pair's runs), largest first. */
  extraCommands: [string, number][];
  /** limited ÷ unlimited steps/s (median of the pairs' ratios). */
  ratio: number;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

function summary(t: ThroughputResult, limited: boolean): LimitsRun {
  const steps = t.tasks * t.steps;
  const cpuMs = t.cpu.filter((c) => c.name !== 'bench client').reduce((a, c) => a + c.cpuMs, 0);
  return {
    limited,
    stepsPerSec: t.stepsPerSec,
    cpuMsPerStep: cpuMs / steps,
    evalshaPerStep: t.work.redisPerStep['evalsha'] ?? 0,
    redisTotalPerStep: t.work.redisTotalPerStep,
    redisPerStep: t.work.redisPerStep,
  };
}

export async function measureLimits(
  client: TriadClient,
  completions: Completions,
  o: { workflow: string; agent: string; tasks: number; steps: number; pairs: number },
  counters: () => Promise<Counters>,
  processes: () => readonly ProcessRef[],
  progress: (msg: string) => void,
): Promise<LimitsResult> {
  const runs: LimitsRun[] = [];
  const ratios: number[] = [];
  const one = async (limited: boolean): Promise<LimitsRun> => {
    if (limited) await client.setAgentLimit(o.agent, { concurrency: NEVER_REACHED });
    else await client.clearAgentLimit(o.agent);
    await sleep(PROPAGATION_MS);
    const r = summary(await measureThroughput(client, completions, o.workflow, o.tasks, o.steps, counters, processes()), limited);
    progress(`limits: ${limited ? 'limited  ' : 'unlimited'} ${r.stepsPerSec.toFixed(0)} steps/s, ${r.evalshaPerStep.toFixed(2)} scripts/step`);
    runs.push(r);
    return r;
  };
  try {
    for (let i = 0; i < o.pairs; i++) {
      // Alternating which goes first: each has the warmer caches in half the pairs.
      let unlimited: LimitsRun;
      let limited: LimitsRun;
      if (i % 2 === 0) {
        unlimited = await one(false);
        limited = await one(true);
      } else {
        limited = await one(true);
        unlimited = await one(false);
      }
      ratios.push(limited.stepsPerSec / unlimited.stepsPerSec);
    }
  } finally {
    await client.clearAgentLimit(o.agent).catch(() => undefined);
  }
  const pick = (limited: boolean): Omit<LimitsRun, 'limited' | 'redisPerStep'> => {
    const rs = runs.filter((r) => r.limited === limited);
    return {
      stepsPerSec: median(rs.map((r) => r.stepsPerSec)),
      cpuMsPerStep: median(rs.map((r) => r.cpuMsPerStep)),
      evalshaPerStep: median(rs.map((r) => r.evalshaPerStep)),
      redisTotalPerStep: median(rs.map((r) => r.redisTotalPerStep)),
    };
  };
  const lastOf = (limited: boolean): Record<string, number> => [...runs].reverse().find((r) => r.limited === limited)?.redisPerStep ?? {};
  const [u, l] = [lastOf(false), lastOf(true)];
  const extraCommands = Object.keys(l)
    .map((c): [string, number] => [c, Math.round(((l[c] ?? 0) - (u[c] ?? 0)) * 100) / 100])
    .filter(([, d]) => d >= 0.5)
    .sort((a, b) => b[1] - a[1]);
  return { agent: o.agent, tasks: o.tasks, steps: o.steps, pairs: o.pairs, runs, unlimited: pick(false), limited: pick(true), ratio: median(ratios), extraCommands };
}

export interface FairnessResult {
  agent: string;
  /** Tasks of customer A submitted first, and how many of them waited in line when B submitted. */
  aTasks: number;
  aWaitingAtB: number;
  bTasks: number;
  /** From B's submissions to the last of B's tasks completed, ms. */
  bCompleteMs: number;
  /** A's tasks not completed when B's last completed: B did not wait behind A's line. */
  aNotCompletedAtB: number;
}

/**
 * Fairness latency (decision 0020 §9.5): `aTasks` one-step io10 tasks of customer A queue under
 * `--key input.customerId --per-key-concurrency 1`; once most of them wait, `bTasks` of customer B are
 * submitted; how long until B's complete (the "within a few seconds", reported, not asserted).
 */
export async function measureFairness(
  client: TriadClient,
  o: { workflow: string; agent: string; aTasks: number; bTasks: number },
  progress: (msg: string) => void,
): Promise<FairnessResult> {
  await client.setAgentLimit(o.agent, { key: 'input.customerId', perKeyConcurrency: 1 });
  try {
    await sleep(PROPAGATION_MS);
    const a = await Promise.all(Array.from({ length: o.aTasks }, (_, i) => client.submit(o.workflow, { customerId: 'A', n: i }).then((r) => r.taskId)));
    let aWaiting = 0;
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const s = (await client.agentLimits({ agent: o.agent, keys: 5 }))[0];
      aWaiting = s?.keys?.find((k) => k.key === 'A')?.waiting ?? 0;
      if (aWaiting >= o.aTasks / 2) break;
      await sleep(20);
    }
    const t0 = Date.now();
    const b = await Promise.all(Array.from({ length: o.bTasks }, (_, i) => client.submit(o.workflow, { customerId: 'B', n: i }).then((r) => r.taskId)));
    await Promise.all(b.map((id) => client.wait(id, { timeoutMs: 120_000 })));
    const bCompleteMs = Date.now() - t0;
    const aStates = await Promise.all(a.map((id) => client.getTask(id)));
    const aNotCompletedAtB = aStates.filter((s) => s.status !== 'completed').length;
    progress(`limits: fairness — ${o.bTasks} tasks of B completed in ${bCompleteMs} ms while ${aNotCompletedAtB} of A's ${o.aTasks} had not`);
    await Promise.all(a.map((id) => client.wait(id, { timeoutMs: 300_000 })));
    return { agent: o.agent, aTasks: o.aTasks, aWaitingAtB: aWaiting, bTasks: o.bTasks, bCompleteMs, aNotCompletedAtB };
  } finally {
    await client.clearAgentLimit(o.agent).catch(() => undefined);
  }
}
