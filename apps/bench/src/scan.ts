/**
 * Supervisor scan cost with 10k vs 1M finished tasks in Redis. The scan namespace has no supervisor of
 * its own: the benchmark makes the leader's sweep itself with the same store calls
 * (packages/supervisor/src/supervisor.ts sweep(): expiredSteps → expireStep per step → purgeFinished →
 * compactFinished → countExpired),
 * over a few hundred live expired deadlines created through the real createTask transition, with
 * finished tasks (replicas of a real one, compacted as every finished task is after
 * TRIAD_COMPACT_AFTER_MS, so not in the compaction index) seeded to each size.
 *
 * Each size gets its own Redis when the run started its servers, and the sizes' rounds alternate, so
 * the load of a shared machine falls on both alike; on one Redis (--use-env) the sizes are measured one
 * after the other, which is noisier.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { compilePlan, validateDefinition } from '@triad/core';
import { SUPERVISOR_DEFAULTS } from '@triad/supervisor';
import { encode } from '@triad/protocol';
import { Leases, TaskStore, keys } from '@triad/store';
import { removeReplicas, replicaId, replicateFinished, type SeedTarget } from './seed.js';
import { median, percentile, sleep } from './timing.js';
import { stallWorkflow } from './workflows.js';

export interface ScanOptions {
  /** Live expired deadlines present at every measurement. */
  liveExpired: number;
  /** Sweeps measured per size (each over a fresh set of live expired steps). */
  rounds: number;
  /** Read-only probes (the sweep's three index reads) per round. */
  probesPerRound: number;
  /** Remove the seeded keys afterwards (when the Redis is not the run's own). */
  cleanUp: boolean;
}

/** One size to measure, on its Redis (the same Redis for every size when only one is available). */
export interface ScanTarget {
  size: number;
  redis: Redis;
}

export interface ScanSize {
  finished: number;
  seedMs: number;
  /**
   * Median and p90 of the sweep's index reads: ZRANGEBYSCORE deadlines -inf now LIMIT 0 500, the
   * retention purge's ZRANGEBYSCORE finished -inf cutoff LIMIT 0 500 and the compaction's on the compact
   * index (nothing due in either), and ZCOUNT, ms.
   */
  probeP50Ms: number;
  probeP90Ms: number;
  /** Median of a whole sweep over `liveExpired` steps (read, one expireStep each, purge, compaction, count), ms. */
  sweepP50Ms: number;
  /** The same, as Redis' own time executing them (INFO commandstats), free of client and network noise, µs. */
  probeServerUs: number;
  sweepServerUs: number;
  /** Bytes in Redis per seeded task (for the record; scan cost must not follow it). */
  replicaBytes: number;
  templateBytes: number;
}

export interface ScanResult extends Omit<ScanOptions, 'cleanUp'> {
  /** 'interleaved': one Redis per size, rounds alternating; 'sequential': one Redis, sizes in turn. */
  method: 'interleaved' | 'sequential';
  sizes: ScanSize[];
  probeRatio: number;
  sweepRatio: number;
  probeServerRatio: number;
  sweepServerRatio: number;
}

/**
 * Redis' cumulative time in the commands a sweep sends (EVALSHA's time includes the script's own
 * commands, which are therefore not added again), µs.
 */
async function serverUsec(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let us = 0;
  for (const m of info.matchAll(/^cmdstat_(zrangebyscore|zcount|evalsha|eval):calls=\d+,usec=(\d+)/gm)) us += Number(m[2]);
  return us;
}

/** The supervisor's defaults: its batch, retention (TRIAD_RETENTION_MS) and compaction delay (TRIAD_COMPACT_AFTER_MS). */
const { batchSize: SWEEP_BATCH, retentionMs: RETENTION_MS, compactAfterMs: COMPACT_AFTER_MS } = SUPERVISOR_DEFAULTS;

interface Samples {
  probes: number[];
  sweeps: number[];
  probeServer: number[];
  sweepServer: number[];
}

/** The measurement on one Redis: live expired steps made through createTask, probes and sweeps. */
function scanner(redis: Redis, namespace: string, o: ScanOptions) {
  const k = keys(namespace);
  const store = new TaskStore(redis, namespace);
  const leases = new Leases(redis, namespace);
  const wf = validateDefinition(stallWorkflow(1_000));
  const plan = compilePlan(wf);
  const input = encode({});
  let liveSeq = 0;

  /** `count` running tasks whose only step's complete-by has passed, made by the real createTask transition. */
  const createExpired = async (count: number): Promise<string[]> => {
    const ids = Array.from({ length: count }, () => `live-${(liveSeq++).toString().padStart(8, '0')}-0000-4000-8000-000000000000`);
    const past = Date.now() - 60_000;
    await Promise.all(
      ids.map(async (taskId) => {
        const lease = leases.task(taskId);
        try {
          await store.createTask({ lease, taskId, workflow: wf.name, version: 1, input, plan, onFailure: 'error', client: 'bench', now: past, schedulerId: 'bench-scan' });
        } finally {
          await leases.release(lease);
        }
      }),
    );
    return ids;
  };
  /** Puts Redis back as it was before createExpired (not timed). */
  const removeLive = async (ids: string[]): Promise<void> => {
    const p = redis.pipeline();
    for (const id of ids) {
      const b = k.forTask(id);
      p.unlink(k.task(id));
      p.zrem(b.deadlines, ...plan.map((s) => `${id}|${s.n}`));
      p.zrem(b.tasks, id);
      p.zrem(b.finished, id);
    }
    await p.exec();
  };

  const samples: Samples = { probes: [], sweeps: [], probeServer: [], sweepServer: [] };
  const seed: SeedTarget = { namespace, idPrefix: 'f0000000-0000-4000-8000-' };
  return {
    seed,
    samples,
    replicaBytes: async (): Promise<number> => Number((await redis.memory('USAGE', k.task(replicaId(seed, 0)), 'SAMPLES', '0')) ?? 0),
    /** One round: fresh live expired steps, read-only probes, then one sweep over them; `record` false = warm-up. */
    round: async (record: boolean): Promise<void> => {
      const live = await createExpired(o.liveExpired);
      const probes: number[] = [];
      const p0 = await serverUsec(redis);
      for (let i = 0; i < o.probesPerRound; i++) {
        const s = performance.now();
        await store.expiredSteps(Date.now(), SWEEP_BATCH);
        // What purgeFinished reads first in every bucket (read here without its deletes; nothing is due anyway).
        const share = Math.ceil(SWEEP_BATCH / k.buckets.length);
        await Promise.all(k.buckets.map((b) => redis.zrangebyscore(b.finished, '-inf', Date.now() - RETENTION_MS, 'LIMIT', 0, share)));
        // And what compactFinished reads first.
        await Promise.all(k.buckets.map((b) => redis.zrangebyscore(b.compact, '-inf', Date.now() - COMPACT_AFTER_MS, 'LIMIT', 0, share)));
        await store.countExpired(Date.now());
        probes.push(performance.now() - s);
      }
      const p1 = await serverUsec(redis);
      // The leader's sweep, minus the NATS publishes (whose cost does not depend on Redis' size).
      const s = performance.now();
      const now = Date.now();
      const expired = await store.expiredSteps(now, SWEEP_BATCH);
      for (const e of expired) await store.expireStep(e.taskId, e.step, now, 0);
      const purged = await store.purgeFinished(now - RETENTION_MS, SWEEP_BATCH, 0);
      const compaction = await store.compactFinished(now - COMPACT_AFTER_MS, SWEEP_BATCH, 0);
      await store.countExpired(Date.now());
      const sweepMs = performance.now() - s;
      const p2 = await serverUsec(redis);
      if (expired.length < o.liveExpired) throw new Error(`scan: the sweep saw ${expired.length} expired steps, expected ${o.liveExpired}`);
      if (purged !== 0) throw new Error(`scan: retention purged ${purged} seeded tasks; they must all be inside the retention time`);
      if (compaction.compacted + compaction.skipped !== 0) throw new Error(`scan: retention compacted ${compaction.compacted} tasks; the seeded ones must already be compacted`);
      await removeLive(live);
      if (!record) return;
      samples.probes.push(...probes);
      samples.sweeps.push(sweepMs);
      samples.probeServer.push((p1 - p0) / o.probesPerRound);
      samples.sweepServer.push(p2 - p1);
    },
  };
}

export async function measureScan(targets: readonly ScanTarget[], namespace: string, template: { record: Record<string, Buffer>; bytes: number }, o: ScanOptions): Promise<ScanResult> {
  const sorted = [...targets].sort((a, b) => a.size - b.size);
  const shared = new Set(sorted.map((t) => t.redis)).size < sorted.length;
  const scanners = shared ? [scanner(sorted[0]?.redis as Redis, namespace, o)] : sorted.map((t) => scanner(t.redis, namespace, o));
  const seeded = scanners.map(() => 0);
  const seedMs = sorted.map(() => 0);
  const sizes: ScanSize[] = [];
  const summarise = async (i: number, finished: number, s: ReturnType<typeof scanner>): Promise<ScanSize> => ({
    finished,
    seedMs: seedMs[i] ?? 0,
    probeP50Ms: median(s.samples.probes),
    probeP90Ms: percentile(s.samples.probes, 90),
    sweepP50Ms: median(s.samples.sweeps),
    probeServerUs: median(s.samples.probeServer),
    sweepServerUs: median(s.samples.sweepServer),
    replicaBytes: await s.replicaBytes(),
    templateBytes: template.bytes,
  });
  const seedTo = async (j: number, size: number, i: number): Promise<void> => {
    const s = scanners[j];
    if (!s) return;
    const t0 = performance.now();
    seeded[j] = (seeded[j] ?? 0) + (await replicateFinished(sorted[i]?.redis as Redis, s.seed, template.record, seeded[j] ?? 0, size));
    seedMs[i] = performance.now() - t0;
  };
  try {
    if (shared) {
      const s = scanners[0];
      if (!s) throw new Error('scan: no target');
      // Unmeasured: the first size must not pay for this process' JIT warm-up.
      for (let w = 0; w < 2; w++) await s.round(false);
      for (const [i, t] of sorted.entries()) {
        await seedTo(0, t.size, i);
        await sleep(1_000); // let Redis finish rehashing its keyspace after the growth
        s.samples.probes.length = s.samples.sweeps.length = s.samples.probeServer.length = s.samples.sweepServer.length = 0;
        for (let r = 0; r < o.rounds; r++) await s.round(true);
        sizes.push(await summarise(i, seeded[0] ?? 0, s));
      }
    } else {
      for (const [i, t] of sorted.entries()) await seedTo(i, t.size, i);
      await sleep(1_000);
      for (const s of scanners) for (let w = 0; w < 2; w++) await s.round(false);
      for (let r = 0; r < o.rounds; r++) for (const s of scanners) await s.round(true);
      for (const [i, s] of scanners.entries()) sizes.push(await summarise(i, seeded[i] ?? 0, s));
    }
  } finally {
    if (o.cleanUp) for (const [j, s] of scanners.entries()) await removeReplicas(sorted[j]?.redis as Redis, s.seed, 0, seeded[j] ?? 0);
  }
  const lo = sizes[0];
  const hi = sizes[sizes.length - 1];
  const ratio = (f: (s: ScanSize) => number): number => (lo && hi ? f(hi) / f(lo) : NaN);
  return {
    method: shared ? 'sequential' : 'interleaved',
    liveExpired: o.liveExpired,
    rounds: o.rounds,
    probesPerRound: o.probesPerRound,
    sizes,
    probeRatio: ratio((s) => s.probeP50Ms),
    sweepRatio: ratio((s) => s.sweepP50Ms),
    probeServerRatio: ratio((s) => s.probeServerUs),
    sweepServerRatio: ratio((s) => s.sweepServerUs),
  };
}
