/**
 * Scaling on clusters (`--mode scaling-cluster`, decision 0015): steps/s of the same no-op batch with 1, 2
 * and 4 scheduler + agent process pairs, on the run's single NATS and Redis and on a 3-node NATS cluster
 * (streams with 3 replicas) with a Redis Cluster of 3 primaries and 3 replicas (WAIT 1 on task creation);
 * Redis commands (summed over the primaries) and NATS messages (summed over the nodes) per step; and what
 * WAIT costs one task creation on the cluster. On a shared 2-core machine every process competes for the
 * same cores: the figures are per-step costs and an upper bound of this machine, not of a deployment.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { TriadClient } from '@triad/client';
import { compilePlan, validateDefinition } from '@triad/core';
import { redisServerArgs, requireBinary, startProcess, type StartedProcess } from '@triad/launcher';
import { encode } from '@triad/protocol';
import { Leases, TaskStore, connectStore, type RedisClient } from '@triad/store';
import { Actors } from './actors.js';
import { runBatch } from './batch.js';
import { Completions } from './completions.js';
import { freePorts, type Servers } from './servers.js';
import { startNatsCluster, waitUntil, type NatsCluster } from './nats-cluster.js';
import { noopWorkflow } from './workflows.js';

export interface ScalingClusterRow {
  setup: 'single' | 'cluster';
  /** Scheduler processes = agent processes. */
  processes: number;
  tasks: number;
  stepsPerSec: number;
  /** Redis commands per step (every primary's commandstats; the replicas' replication stream not counted). */
  redisPerStep: number;
  /** The commands behind redisPerStep with at least 0.05 per step. */
  redisByCommand: Record<string, number>;
  /** Messages into the NATS servers per step (clients and, on the cluster, routes between nodes). */
  natsInPerStep: number;
}

export interface ScalingClusterResult {
  rows: ScalingClusterRow[];
  /** Sequential task creations on the cluster: median ms without and with WAIT 1. */
  createP50Ms: { noWait: number; wait1: number };
  note: string;
}

interface Setup {
  name: 'single' | 'cluster';
  natsUrl: string;
  natsMonitors: string[];
  redisUrl: string;
  /** Nodes whose commandstats count (the primaries). */
  redisCounted: () => Promise<string[]>;
  env: Record<string, string>;
  stop(): Promise<void>;
}

const STEPS = 3;
const BY_SCALING_CLUSTER = { by: 'by the bench\'s --mode scaling-cluster' };

/** Runs the comparison; `servers` are the run's own single NATS and Redis. */
export async function measureScalingCluster(servers: Servers, tmpDir: string, tasks: number, processes: readonly number[], progress: (m: string) => void): Promise<ScalingClusterResult> {
  const single: Setup = {
    name: 'single',
    natsUrl: servers.natsUrl,
    natsMonitors: servers.natsMonitorUrl ? [servers.natsMonitorUrl] : [],
    redisUrl: servers.redisUrl,
    redisCounted: () => Promise.resolve([servers.redisUrl]),
    env: {},
    stop: () => Promise.resolve(),
  };
  progress('scaling-cluster: starting a 3-node NATS cluster and a Redis Cluster of 3 primaries + 3 replicas');
  const cluster = await startClusters(tmpDir);
  const rows: ScalingClusterRow[] = [];
  try {
    for (const n of processes) {
      for (const setup of [single, cluster]) {
        progress(`scaling-cluster: ${setup.name}, ${n} scheduler + ${n} agent process(es), ${tasks} tasks × ${STEPS} steps`);
        rows.push(await measureOne(setup, n, tasks, tmpDir));
      }
    }
    progress('scaling-cluster: what WAIT 1 costs a task creation on the cluster');
    const createP50Ms = await waitCost(cluster);
    return {
      rows,
      createP50Ms,
      note: 'every process of both setups shares this machine\'s cores; steps/s is capped by the machine, per-step costs are not',
    };
  } finally {
    await cluster.stop();
  }
}

async function measureOne(setup: Setup, n: number, tasks: number, tmpDir: string): Promise<ScalingClusterRow> {
  const namespace = `scl${setup.name[0]}${n}_${Date.now().toString(36)}`;
  // A scratch directory of its own: the run's actors' health files (scheduler-1.hb, …) are in tmpDir, and
  // these actors, numbered from 1 again, would take them for their own and count as ready at once.
  const actors = new Actors({ natsUrl: setup.natsUrl, redisUrl: setup.redisUrl, namespace, tmpDir: join(tmpDir, namespace), env: setup.env });
  try {
    await Promise.all([...Array.from({ length: n }, () => actors.scheduler()), actors.supervisor(1_000, 5_000), actors.agents(['noop'], n)]);
    const client = await TriadClient.connect({ natsUrl: setup.natsUrl, namespace, name: 'triad-bench-scl' });
    const completions = new Completions(client);
    try {
      const wf = noopWorkflow(STEPS);
      await client.registerWorkflow(wf);
      await runBatch(client, completions, wf.name, Math.min(60, tasks), STEPS); // warm-up, unmeasured
      const before = await counters(setup);
      const r = await runBatch(client, completions, wf.name, tasks, STEPS);
      const after = await counters(setup);
      const steps = tasks * STEPS;
      const byCommand: Record<string, number> = {};
      let total = 0;
      for (const [cmd, v] of after.redis) {
        if (cmd === 'info' || cmd === 'cluster' || cmd === 'ping') continue; // the measurement's and the client's own
        const d = (v - (before.redis.get(cmd) ?? 0)) / steps;
        total += d;
        if (d >= 0.05) byCommand[cmd] = round(d);
      }
      return {
        setup: setup.name,
        processes: n,
        tasks,
        stepsPerSec: Math.round(steps / (r.elapsedMs / 1000)),
        redisPerStep: round(total),
        redisByCommand: byCommand,
        natsInPerStep: round((after.natsIn - before.natsIn) / steps),
      };
    } finally {
      await completions.close();
      await client.close();
    }
  } finally {
    await actors.stopAll();
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

async function counters(setup: Setup): Promise<{ redis: Map<string, number>; natsIn: number }> {
  const redis = new Map<string, number>();
  for (const url of await setup.redisCounted()) {
    const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      const info = await r.info('commandstats');
      for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) redis.set(m[1] ?? '?', (redis.get(m[1] ?? '?') ?? 0) + Number(m[2]));
    } finally {
      r.disconnect();
    }
  }
  let natsIn = 0;
  for (const m of setup.natsMonitors) {
    const v = (await (await fetch(`${m}/varz`)).json()) as { in_msgs?: number };
    natsIn += v.in_msgs ?? 0;
  }
  return { redis, natsIn };
}

/** Median of 300 sequential createTask transitions on the cluster, without and with WAIT 1. */
async function waitCost(setup: Setup): Promise<{ noWait: number; wait1: number }> {
  const redis: RedisClient = await connectStore({ url: setup.redisUrl, cluster: setup.env['TRIAD_REDIS_CLUSTER'] ?? '' }, { connectionName: 'triad-bench-wait' });
  try {
    const namespace = `sclwait_${Date.now().toString(36)}`;
    const wf = validateDefinition(noopWorkflow(1));
    const plan = compilePlan(wf);
    const leases = new Leases(redis, namespace);
    const p50 = async (store: TaskStore, prefix: string): Promise<number> => {
      const ms: number[] = [];
      for (let i = 0; i < 300; i++) {
        const taskId = `${prefix}-${i}`;
        const lease = leases.task(taskId);
        const t0 = performance.now();
        await store.createTask({ lease, taskId, workflow: wf.name, version: 1, input: encode({}), plan, onFailure: 'error', client: 'bench', now: Date.now(), schedulerId: 'bench' });
        ms.push(performance.now() - t0);
        await leases.release(lease);
      }
      ms.sort((a, b) => a - b);
      return round(ms[Math.floor(ms.length / 2)] ?? NaN);
    };
    const noWait = await p50(new TaskStore(redis, namespace), 'nowait');
    const wait1 = await p50(new TaskStore(redis, namespace, { waitReplicas: 1, waitMs: 2_000 }), 'wait1');
    return { noWait, wait1 };
  } finally {
    redis.disconnect();
  }
}

/** The clusters, with no persistence (as the bench's single servers). */
async function startClusters(tmpDir: string): Promise<Setup> {
  const children: StartedProcess[] = [];
  let nats: NatsCluster | undefined;
  const stop = async (): Promise<void> => {
    await Promise.all([...children.map((c) => c.stop(5_000)), nats?.stop()]);
  };
  try {
    nats = await startNatsCluster(tmpDir, { label: 'nats-c', purpose: BY_SCALING_CLUSTER });
    const redisPorts = await freePorts(6);
    for (const port of redisPorts) {
      const dir = join(tmpDir, `redis-c${port}`);
      mkdirSync(dir, { recursive: true });
      children.push(
        await startProcess({
          name: `redis-c${port}`,
          command: requireBinary('redis-server', BY_SCALING_CLUSTER),
          args: redisServerArgs({ port, dir, extra: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'] }),
        }),
      );
    }
    await waitUntil(async () => (await Promise.all(redisPorts.map((p) => ping(p)))).every(Boolean), 'the Redis nodes to answer');
    const create = spawnSync(requireBinary('redis-cli', BY_SCALING_CLUSTER), ['--cluster', 'create', ...redisPorts.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], { encoding: 'utf8', timeout: 60_000 });
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stderr || create.stdout}`);
    await waitUntil(async () => (await Promise.all(redisPorts.map((p) => clusterOk(p)))).every(Boolean), 'the Redis Cluster state to be ok on every node');
    const seeds = redisPorts.map((p) => `127.0.0.1:${p}`).join(',');
    return {
      name: 'cluster',
      natsUrl: nats.url,
      natsMonitors: nats.monitors,
      redisUrl: `redis://127.0.0.1:${redisPorts[0] as number}`,
      redisCounted: async () => {
        const out: string[] = [];
        for (const p of redisPorts) if (await isPrimary(p)) out.push(`redis://127.0.0.1:${p}`);
        return out;
      },
      env: { TRIAD_REDIS_CLUSTER: seeds, TRIAD_STREAM_REPLICAS: '3', TRIAD_REDIS_WAIT_REPLICAS: '1' },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

async function withRedis<T>(port: number, f: (r: Redis) => Promise<T>): Promise<T | undefined> {
  const r = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await r.connect();
    return await f(r);
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

const ping = (port: number): Promise<boolean> => withRedis(port, async (r) => (await r.ping()) === 'PONG').then(Boolean);
const clusterOk = (port: number): Promise<boolean> => withRedis(port, async (r) => /cluster_state:ok/.test(String(await r.call('CLUSTER', 'INFO')))).then(Boolean);
const isPrimary = (port: number): Promise<boolean> => withRedis(port, async (r) => /role:master/.test(await r.info('replication'))).then(Boolean);
