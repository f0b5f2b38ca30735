/**
 * The benchmark's own NATS (JetStream, store in a temp dir) and Redis (no persistence) on free ports,
 * or the ones NATS_URL / REDIS_URL name when `--use-env` is given. With `--durable`, servers that lose
 * no acknowledged write on a power cut: Redis with `appendfsync always`, and JetStream syncing every
 * write (`sync_interval: always`, nats-server 2.10+) or, on an older nats-server, a 3-node cluster with
 * every stream replicated 3 times (an acknowledgement means a quorum holds the message).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePorts, natsServerArgs, requireBinary, startNatsServer, startProcess, startRedisServer, waitListening, type LaunchedServer } from '@triad/launcher';
import { loadConfig, type NatsConnectionOptions, type RedisConnectionOptions } from '@triad/settings';
import type { ProcessRef } from './cpu.js';
import { startNatsCluster } from './nats-cluster.js';

/** Re-exported for the bench's other servers (the peers, the clusters). */
export { freePorts };

const BY_BENCH = { by: 'by npm run bench', orElse: 'pass --use-env with NATS_URL and REDIS_URL' };

export interface Servers {
  natsUrl: string;
  redisUrl: string;
  /** How the bench's own connections reach them (with --use-env: the environment's credentials and TLS too). */
  nats: NatsConnectionOptions;
  redis: RedisConnectionOptions;
  /** nats-server's HTTP monitoring endpoint (for message counts), when known. */
  natsMonitorUrl?: string;
  /** Whether this run started them (and so may flush and stop them). */
  own: boolean;
  /** The server processes, when this run started them (for CPU accounting). */
  processes: ProcessRef[];
  /** With --durable: what makes an acknowledged write survive a power cut, and the actors' extra environment. */
  durability?: Durability;
  stop(): Promise<void>;
}

export interface Durability {
  /** How JetStream makes an acknowledged message durable. */
  nats: string;
  redis: string;
  /** Replicas of every stream (3 on the cluster). */
  streamReplicas: number;
  /** For every actor (TRIAD_STREAM_REPLICAS on the cluster). */
  actorEnv: Record<string, string>;
}

/** The version `nats-server --version` prints ("nats-server: v2.9.10"), or undefined. */
export function parseNatsVersion(output: string): [number, number, number] | undefined {
  const m = /v?(\d+)\.(\d+)\.(\d+)/.exec(output);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** JetStream's `sync_interval: always` (an fsync per write) exists from nats-server 2.10 on. */
export function supportsSyncAlways(v: readonly [number, number, number] | undefined): boolean {
  return v !== undefined && (v[0] > 2 || (v[0] === 2 && v[1] >= 10));
}

/** The configuration file of a durable single nats-server: JetStream with an fsync per write. */
export function syncAlwaysConfig(storeDir: string): string {
  return `jetstream {\n  store_dir: ${JSON.stringify(storeDir)}\n  sync_interval: always\n}\n`;
}

/**
 * --durable: Redis with `appendfsync always`; nats-server 2.10+ alone with `sync_interval: always`,
 * else the 3-node R3 cluster.
 */
export async function startDurableServers(tmpDir: string, progress: (m: string) => void): Promise<Servers> {
  const bin = requireBinary('nats-server', BY_BENCH);
  const out = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  const version = parseNatsVersion(`${out.stdout ?? ''}${out.stderr ?? ''}`);
  const stops: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(stops.map((f) => f()));
  };
  try {
    const redis = await startRedisServer({ name: 'redis-server', dir: tmpDir, aof: 'always', purpose: BY_BENCH });
    stops.push(() => redis.stop());
    const redisPart = { natsUrl: '', redisUrl: redis.url, redis: { url: redis.url }, own: true, stop };
    const redisDesc = 'appendfsync always (an fsync per write before the reply)';
    if (supportsSyncAlways(version)) {
      progress(`durable: nats-server ${version?.join('.') ?? '?'} with sync_interval: always`);
      const storeDir = join(tmpDir, 'nats');
      const config = join(tmpDir, 'nats-durable.conf');
      writeFileSync(config, syncAlwaysConfig(storeDir));
      const [port = 0, monitorPort = 0] = await freePorts(2);
      const p = await startProcess({ name: 'nats-server', command: bin, args: natsServerArgs({ configFile: config, port, monitorPort, storeDir }) });
      stops.push(() => p.stop());
      await waitListening({ host: '127.0.0.1', port, name: 'nats-server', exited: () => (p.isRunning() ? undefined : 'exited during start-up'), detail: () => `; last output:\n${p.tail()}` });
      const url = `nats://127.0.0.1:${port}`;
      return {
        ...redisPart,
        natsUrl: url,
        nats: { url },
        natsMonitorUrl: `http://127.0.0.1:${monitorPort}`,
        processes: [
          { name: 'nats-server', pid: p.pid },
          { name: 'redis-server', pid: redis.process.pid },
        ],
        durability: { nats: `nats-server ${version?.join('.') ?? '?'}, sync_interval: always (an fsync per write before the PubAck)`, redis: redisDesc, streamReplicas: 1, actorEnv: {} },
      };
    }
    progress(`durable: nats-server ${version?.join('.') ?? '(version unknown)'} has no sync_interval: always (2.10+); a 3-node cluster with R3 streams instead`);
    const cluster = await startNatsCluster(tmpDir, { label: 'nats-d', purpose: BY_BENCH });
    stops.push(() => cluster.stop());
    return {
      ...redisPart,
      natsUrl: cluster.url,
      nats: { url: cluster.url },
      // Message counts are left out on the cluster: its nodes count route traffic too.
      processes: [...cluster.processes, { name: 'redis-server', pid: redis.process.pid }],
      durability: {
        nats: `nats-server ${version?.join('.') ?? '?'} (no sync_interval: always before 2.10): 3-node cluster, streams R3 — a PubAck means 2 of 3 nodes hold the message (written, fsynced within 2 min)`,
        redis: redisDesc,
        streamReplicas: 3,
        actorEnv: { TRIAD_STREAM_REPLICAS: '3' },
      },
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

export async function startServers(tmpDir: string): Promise<Servers> {
  const nats = await startNatsServer({ storeDir: join(tmpDir, 'nats'), monitor: true, purpose: BY_BENCH });
  let redis: LaunchedServer;
  try {
    // No persistence: the benchmark measures Triad, not Redis' disk.
    redis = await startRedisServer({ name: 'redis-server', dir: tmpDir, purpose: BY_BENCH });
  } catch (e) {
    await nats.stop();
    throw e;
  }
  return {
    natsUrl: nats.url,
    redisUrl: redis.url,
    nats: { url: nats.url },
    redis: { url: redis.url },
    ...(nats.monitorUrl ? { natsMonitorUrl: nats.monitorUrl } : {}),
    own: true,
    processes: [
      { name: 'nats-server', pid: nats.process.pid },
      { name: 'redis-server', pid: redis.process.pid },
    ],
    stop: async () => {
      await Promise.all([nats.stop(), redis.stop()]);
    },
  };
}

/** One more private Redis (the scan measurement gives each size its own). */
export async function startRedis(name: string, tmpDir: string): Promise<{ url: string; stop(): Promise<void> }> {
  const redis = await startRedisServer({ name, dir: tmpDir, purpose: BY_BENCH });
  return { url: redis.url, stop: () => redis.stop() };
}

/** The servers of the environment, with its NATS credentials and TLS settings (checked as every actor checks them). */
export function envServers(): Servers {
  const monitor = process.env['NATS_MONITOR_URL'];
  const config = loadConfig(process.env);
  return {
    natsUrl: config.natsUrl,
    redisUrl: config.redisUrl,
    nats: config.nats,
    redis: config.redis,
    ...(monitor ? { natsMonitorUrl: monitor } : {}),
    own: false,
    processes: [],
    stop: () => Promise.resolve(),
  };
}
