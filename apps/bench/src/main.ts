/**
 * `npm run bench -- [--tasks N] [--steps S] [--agents K] [--peers bullmq,restate] [--json] [--mode m]`:
 * starts its own NATS and Redis (or uses NATS_URL/REDIS_URL with --use-env), runs Triad's actors as
 * separate processes, measures Triad's throughput and latency beside the peers a user would pick instead
 * (BullMQ flows, Restate) and the raw JetStream baseline, then recovery, scan cost, memory and scaling,
 * in one run; prints the peer table and one table of figures, and stops everything it started — also
 * on failure or Ctrl-C.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { DEFAULT_AGENT_CONCURRENCY } from '@triad/agent';
import { TriadClient } from '@triad/client';
import { killChildrenOnSignals, releaseScratchDir, terminateAll, trackScratchDir, type StartedProcess } from '@triad/launcher';
import { errorMessage } from '@triad/protocol';
import { redactUrl } from '@triad/settings';
import { connectRedis, keys } from '@triad/store';
import { Actors } from './actors.js';
import { runBatch } from './batch.js';
import { measureBaseline } from './baseline.js';
import { readCounters } from './counters.js';
import { removeNamespace } from './cleanup.js';
import { Completions } from './completions.js';
import { measureLatency } from './latency.js';
import { measureFairness, measureLimits } from './limits.js';
import { measureMemory, type SupervisorControl } from './memory.js';
import { measureHandover, measureRecovery } from './recovery.js';
import { measureSleepLateness } from './sleep-lateness.js';
import { peerTable, details, durabilityLine, jsonSummary, table, type Results } from './report.js';
import { measurePeers } from './peers/index.js';
import { measureScaling } from './scaling.js';
import { measureScalingCluster } from './scaling-cluster.js';
import { measureScan, type ScanResult, type ScanTarget } from './scan.js';
import { envServers, startDurableServers, startRedis, startServers, type Servers } from './servers.js';
import { measureFloors } from './floors.js';
import { benchPayload, measureThroughput } from './throughput.js';
import { sleep } from './timing.js';
import { parseOptions, type Mode, type Options } from './options.js';
import { ioWorkflow, noopWorkflow, stallWorkflow } from './workflows.js';

const progress = (msg: string): void => void process.stderr.write(`bench: ${msg}\n`);

/** Waits (bounded) until the supervisor has compacted a finished task's record. */
async function compacted(redis: Redis, taskKey: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if ((await redis.hexists(taskKey, 'c')) === 1) return;
    await sleep(50);
  }
  throw new Error(`${taskKey} was not compacted within 15 s; is the supervisor running with TRIAD_COMPACT_AFTER_MS=0 and leading?`);
}

async function supervisorRetries(client: TriadClient): Promise<number> {
  const s = await client.supervisorStatus();
  return s.supervisors.reduce((a, x) => a + x.retries, 0);
}

/**
 * The scan measurement on one Redis per size when the run owns its servers (rounds then alternate
 * between sizes, so machine noise hits both alike), else on the configured Redis, sizes in turn.
 */
async function scanOnTargets(o: Options, servers: Servers, tmp: string, namespace: string, redis: Redis, template: { record: Record<string, Buffer>; bytes: number }): Promise<ScanResult> {
  const opts = { liveExpired: o.scanLive, rounds: o.scanRounds, probesPerRound: 40, cleanUp: !servers.own };
  const scanNs = `${namespace}-scan`;
  if (!servers.own) return measureScan(o.scanSizes.map((size) => ({ size, redis })), scanNs, template, opts);
  const started: { stop(): Promise<void> }[] = [];
  const conns: Redis[] = [];
  try {
    const targets: ScanTarget[] = [];
    for (const size of o.scanSizes) {
      const r = await startRedis(`redis-scan-${size}`, tmp);
      started.push(r);
      const c = await connectRedis(r.url, { connectionName: 'triad-bench-scan' });
      conns.push(c);
      targets.push({ size, redis: c });
    }
    return await measureScan(targets, scanNs, template, opts);
  } finally {
    for (const c of conns) c.disconnect();
    // Stopped at once: the largest holds gigabytes.
    await Promise.all(started.map((r) => r.stop()));
  }
}

async function run(o: Options, cleanups: (() => Promise<void>)[]): Promise<Results> {
  const namespace = `bench-${randomBytes(4).toString('hex')}`;
  const tmp = mkdtempSync(join(tmpdir(), 'triad-bench-'));
  // Removed by the launcher's exit hook or reaper too, should the run die without its cleanups.
  trackScratchDir(tmp);
  cleanups.push(() => {
    rmSync(tmp, { recursive: true, force: true });
    releaseScratchDir(tmp);
    return Promise.resolve();
  });
  const has = (m: Mode): boolean => o.mode.includes(m);
  const results: Results = { config: { namespace, ...o, mode: o.mode.join(',') } };

  progress(o.useEnv ? 'using NATS_URL / REDIS_URL' : `starting ${o.durable ? 'durable ' : ''}nats-server and redis-server on free ports`);
  const servers: Servers = o.useEnv ? envServers() : o.durable ? await startDurableServers(tmp, progress) : await startServers(tmp);
  cleanups.push(() => servers.stop());
  progress(`NATS ${servers.natsUrl}, Redis ${redactUrl(servers.redisUrl)}, namespace ${namespace}`);
  if (servers.durability) results.durability = servers.durability;
  const replicas = servers.durability?.streamReplicas ?? 1;

  if (has('throughput')) {
    progress(`baseline: ${o.tasks} chains × ${o.steps} JetStream round trips through a second process`);
    results.baseline = await measureBaseline({
        nats: servers.nats,
        namespace,
        chains: o.tasks,
        hops: o.steps,
        driverConcurrency: 64,
        echoConcurrency: DEFAULT_AGENT_CONCURRENCY * o.agents,
        payloadBytes: 256,
        warmupChains: Math.min(200, Math.ceil(o.tasks / 10)),
      servers: servers.processes,
      replicas,
      ...(servers.natsMonitorUrl ? { natsMonitorUrl: servers.natsMonitorUrl } : {}),
    });
  }

  const actors = new Actors({ natsUrl: servers.natsUrl, redisUrl: servers.redisUrl, namespace, tmpDir: tmp, ...(servers.durability ? { env: servers.durability.actorEnv } : {}) });
  cleanups.push(() => actors.stopAll());
  progress(`starting the scheduler, the supervisor and ${o.agents} agent process(es)`);
  await actors.scheduler();
  // The service's default compaction delay (10 min) until a measurement needs another: compaction stays
  // out of the throughput figures, as it would for the first minutes of any deployment.
  const sup: { child: StartedProcess; compactAfterMs: number | undefined } = { child: await actors.supervisor(o.supervisorIntervalMs, o.supervisorLeaseMs), compactAfterMs: undefined };
  const supervisor: SupervisorControl = {
    compactAfter: async (ms) => {
      if (sup.compactAfterMs === ms) return;
      // Stopped gracefully, it resigns: the new one leads at once.
      await sup.child.stop(10_000);
      sup.child = await actors.supervisor(o.supervisorIntervalMs, o.supervisorLeaseMs, ms);
      sup.compactAfterMs = ms;
    },
  };
  await actors.agents(['noop'], o.agents);

  const { url: natsUrl, ...natsAuth } = servers.nats;
  const client = await TriadClient.connect({ ...natsAuth, ...(natsUrl !== undefined ? { natsUrl } : {}), namespace, name: 'triad-bench' });
  cleanups.push(() => client.close());
  const redis: Redis = await connectRedis(servers.redis, { connectionName: 'triad-bench' });
  cleanups.push(() => Promise.resolve(redis.disconnect()));
  // Registered after the client and Redis (cleanups run in reverse), so both are still open here.
  if (!servers.own) {
    cleanups.push(async () => {
      await actors.stopAll(); // before their streams go
      await removeNamespace(redis, client, namespace);
    });
  }
  const completions = new Completions(client);
  cleanups.push(() => completions.close());

  const noop = noopWorkflow(o.steps);
  const noop3 = noopWorkflow(3);
  for (const wf of [noop, noop3]) await client.registerWorkflow(wf);

  if (has('throughput')) {
    progress(`throughput: warm-up, then ${o.tasks} tasks × ${o.steps} steps at once`);
    const input = o.payloadBytes > 0 ? { payload: benchPayload(o.payloadBytes) } : {};
    await runBatch(client, completions, noop.name, Math.min(200, Math.ceil(o.tasks / 10)), o.steps, input);
    results.throughput = await measureThroughput(
      client,
      completions,
      noop.name,
      o.tasks,
      o.steps,
      () => readCounters(redis, servers.natsMonitorUrl),
      [...servers.processes, ...actors.running()],
      input,
    );
    if (o.latencyTasks > 0) {
      progress(`latency: ${o.warmup} warm-up + ${o.latencyTasks} 3-step tasks one at a time`);
      results.latency = await measureLatency(client, noop3.name, o.latencyTasks, o.warmup);
      progress(`floors: ${o.latencyTasks} stored JetStream hops and Redis round trips one at a time`);
      results.floors = await measureFloors({ nats: servers.nats, namespace, replicas, samples: o.latencyTasks, warmup: o.warmup }, redis);
    }
    if (o.peers.length > 0) {
      // The same tasks, steps and latency runs; workers as concurrent as Triad's agents; BullMQ on the run's Redis.
      const redisPid = servers.processes.find((p) => p.name === 'redis-server')?.pid;
      results.peers = await measurePeers(
        o.peers,
        { tasks: o.tasks, steps: o.steps, latencyTasks: o.latencyTasks, warmup: o.warmup, concurrency: DEFAULT_AGENT_CONCURRENCY * o.agents, redisUrl: servers.redisUrl, namespace, tmpDir: tmp, progress },
        redisPid,
      );
    }
  }
  if (has('memory')) {
    progress(`memory: ${o.memoryTasks} finished 3-step tasks, before and after the supervisor compacts them`);
    results.memory = await measureMemory(client, completions, redis, namespace, noop3.name, o.memoryTasks, 3, servers.own, supervisor);
  }
  if (has('throughput') || has('memory')) results.supervisorRetriesDuringLoad = await supervisorRetries(client);
  if (has('scaling')) {
    const io = ioWorkflow(3);
    await client.registerWorkflow(io);
    progress(`scaling: ${o.scalingTasks} io10 tasks × 3 steps, 1 then 2 agent processes`);
    results.scaling = await measureScaling(actors, client, completions, redis, io.name, o.scalingTasks, 3, o.scalingRepeats);
  }
  if (has('scaling-cluster')) {
    if (!servers.own) throw new Error('--mode scaling-cluster starts its own clusters and compares them with the run\'s own servers: run it without --use-env');
    results.scalingCluster = await measureScalingCluster(servers, tmp, o.scalingClusterTasks, [1, 2, 4], progress);
  }
  if (has('limits')) {
    progress(`limits: ${o.limitsPairs} pairs of ${o.limitsTasks} tasks × 3 steps, unlimited and limited (concurrency never reached)`);
    await runBatch(client, completions, noop3.name, Math.min(200, Math.ceil(o.limitsTasks / 10)), 3);
    results.limits = await measureLimits(
      client,
      completions,
      { workflow: noop3.name, agent: 'noop', tasks: o.limitsTasks, steps: 3, pairs: o.limitsPairs },
      () => readCounters(redis, servers.natsMonitorUrl),
      () => [...servers.processes, ...actors.running()],
      progress,
    );
    // Fairness latency: an I/O-bound agent (10 ms a step) so that a line of one customer takes seconds.
    const io1 = ioWorkflow(1);
    await client.registerWorkflow(io1);
    await actors.agent(['io10']);
    progress('limits: fairness — 600 tasks of customer A in line (1 at a time per customer), then 5 of B');
    results.limitsFairness = await measureFairness(client, { workflow: io1.name, agent: 'io10', aTasks: 600, bTasks: 5 }, progress);
  }
  if (has('recovery')) {
    const stall = stallWorkflow(o.recoveryBudgetMs);
    await client.registerWorkflow(stall);
    progress(`recovery: ${o.recoverySamples} agent kills mid-step`);
    results.recovery = await measureRecovery(actors, client, stall.name, {
      samples: o.recoverySamples,
      budgetMs: o.recoveryBudgetMs,
      intervalMs: o.supervisorIntervalMs,
      leaseMs: o.supervisorLeaseMs,
    });
    progress(`recovery: ${o.recoverySamples} supervisor leader kills (kill -9)`);
    results.handover = await measureHandover(
      { current: () => sup.child, replace: (next) => (sup.child = next), start: () => actors.supervisor(o.supervisorIntervalMs, o.supervisorLeaseMs, sup.compactAfterMs) },
      redis,
      namespace,
      { samples: o.recoverySamples, leaseMs: o.supervisorLeaseMs },
    );
    progress('recovery: how late durable sleeps end');
    results.sleep = await measureSleepLateness(client, { samples: 12, sleepMs: 1_000, intervalMs: o.supervisorIntervalMs });
  }
  if (has('scan')) {
    // A real finished task (the actors ran it), compacted by the supervisor as every finished task is
    // after TRIAD_COMPACT_AFTER_MS, is the record every seeded one copies.
    await supervisor.compactAfter(0);
    const b = await runBatch(client, completions, noop3.name, 5, 3);
    const id = b.taskIds[0] ?? '';
    const k = keys(namespace);
    await compacted(redis, k.task(id));
    const record = await redis.hgetallBuffer(k.task(id));
    const bytes = Number((await redis.memory('USAGE', k.task(id), 'SAMPLES', '0')) ?? 0);
    progress(`scan: seeding ${o.scanSizes.map((n) => n.toLocaleString('en')).join(' and ')} finished tasks (replicas of ${id}, ${bytes} bytes each)`);
    results.scan = await scanOnTargets(o, servers, tmp, namespace, redis, { record, bytes });
  }
  return results;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv);
  const cleanups: (() => Promise<void>)[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanUp = (): Promise<void> =>
    (cleaning ??= (async () => {
      for (const fn of cleanups.reverse()) await fn().catch((e: unknown) => progress(`cleanup: ${errorMessage(e)}`));
      // Whatever a failed step left running (each SIGTERM, then SIGKILL after 5 s).
      await terminateAll(5_000);
    })());
  // The run stops its children itself, gracefully (a --cpu-prof profile is written on a graceful exit);
  // the launcher's exit hook and its reaper still catch anything a crash leaves.
  killChildrenOnSignals(false);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      progress(`${sig}: stopping everything this run started`);
      void cleanUp().finally(() => process.exit(130));
    });
  }
  let results: Results;
  try {
    results = await run(o, cleanups);
  } catch (e) {
    progress(`FAILED: ${errorMessage(e)}`);
    await cleanUp();
    process.exit(1);
  }
  await cleanUp();
  // The peer table opens with the durability line; without one, the line opens the figures.
  const peers = peerTable(results);
  const durable = peers ? undefined : durabilityLine(results);
  process.stdout.write(`\n${peers ? `${peers}\n\n` : ''}${durable ? `${durable}\n\n` : ''}${table(results)}\n${details(results)}\n`);
  if (o.json) process.stdout.write(`${JSON.stringify(jsonSummary(results))}\n`);
}

void main();
