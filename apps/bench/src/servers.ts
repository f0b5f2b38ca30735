/**
 * The benchmark's own NATS (JetStream, store in a temp dir) and Redis (no persistence) on free ports,
 * or the ones NATS_URL / REDIS_URL name when `--use-env` is given.
 */
import { join } from 'node:path';
import { freePorts, requireBinary, startProcess, waitListening, type StartedProcess } from '@triad/launcher';
import { loadConfig, type NatsConnectionOptions, type RedisConnectionOptions } from '@triad/protocol';
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

/** Until the child listens on 127.0.0.1:port; fails with its last output if it exits first or never does. */
function childListening(c: StartedProcess, port: number): Promise<void> {
  return waitListening({ host: '127.0.0.1', port, name: c.name, exited: () => (c.isRunning() ? undefined : 'exited during start-up'), detail: () => `; last output:\n${c.tail()}` });
}

export async function startServers(tmpDir: string): Promise<Servers> {
  const natsBinary = requireBinary('nats-server', BY_BENCH);
  const [natsPort, redisPort, monitorPort] = await freePorts(3);
  if (natsPort === undefined || redisPort === undefined || monitorPort === undefined) throw new Error('no free ports');
  const nats = await startProcess({ name: 'nats-server', command: natsBinary, args: ['-a', '127.0.0.1', '-p', String(natsPort), '-m', String(monitorPort), '-js', '-sd', join(tmpDir, 'nats')] });
  let redis: StartedProcess | undefined;
  try {
    redis = await spawnRedis('redis-server', redisPort, tmpDir);
    await Promise.all([childListening(nats, natsPort), childListening(redis, redisPort)]);
  } catch (e) {
    await Promise.all([nats.stop(), redis?.stop()]);
    throw e;
  }
  const natsUrl = `nats://127.0.0.1:${natsPort}`;
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  return {
    natsUrl,
    redisUrl,
    nats: { url: natsUrl },
    redis: { url: redisUrl },
    natsMonitorUrl: `http://127.0.0.1:${monitorPort}`,
    own: true,
    processes: [
      { name: 'nats-server', pid: nats.pid },
      { name: 'redis-server', pid: redis.pid },
    ],
    stop: async () => {
      await Promise.all([nats.stop(), redis.stop()]);
    },
  };
}

function spawnRedis(name: string, port: number, dir: string): Promise<StartedProcess> {
  // No persistence: the benchmark measures Triad, not Redis' disk.
  return startProcess({ name, command: requireBinary('redis-server', BY_BENCH), args: ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir] });
}

/** One more private Redis (the scan measurement gives each size its own). */
export async function startRedis(name: string, tmpDir: string): Promise<{ url: string; stop(): Promise<void> }> {
  const [port] = await freePorts(1);
  if (port === undefined) throw new Error('no free port');
  const redis = await spawnRedis(name, port, tmpDir);
  try {
    await childListening(redis, port);
  } catch (e) {
    await redis.stop();
    throw e;
  }
  return { url: `redis://127.0.0.1:${port}`, stop: () => redis.stop() };
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
