/**
 * The benchmark's own NATS (JetStream, store in a temp dir) and Redis (no persistence) on free ports,
 * or the ones NATS_URL / REDIS_URL name when `--use-env` is given.
 */
import { join } from 'node:path';
import { freePorts, startNatsServer, startRedisServer, type LaunchedServer } from '@triad/launcher';
import { loadConfig, type NatsConnectionOptions, type RedisConnectionOptions } from '@triad/settings';
import type { ProcessRef } from './cpu.js';

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
  stop(): Promise<void>;
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
