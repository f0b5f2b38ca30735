/**
 * The benchmark's own NATS (JetStream, store in a temp dir) and Redis (no persistence) on free ports,
 * or the ones NATS_URL / REDIS_URL name when `--use-env` is given.
 */
import { spawnSync } from 'node:child_process';
import { loadConfig, type NatsConnectionOptions, type RedisConnectionOptions } from '@triad/protocol';
import { join } from 'node:path';
import { createServer, connect, type Server } from 'node:net';
import { spawnChild, type Child } from './procs.js';
import type { ProcessRef } from './cpu.js';
import { sleep } from './timing.js';

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

/** Distinct free loopback ports: all listeners are held together so one port is not handed out twice. */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      servers.push(
        await new Promise<Server>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => resolve(s));
        }),
      );
    }
    return servers.map((s) => {
      const a = s.address();
      if (a === null || typeof a === 'string') throw new Error('unexpected listener address');
      return a.port;
    });
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(500, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

function requireBinary(name: string): void {
  const r = spawnSync(name, ['--version'], { stdio: 'ignore' });
  if (r.error) throw new Error(`${name} is not on PATH: install it (Debian/Ubuntu: apt-get install -y ${name}) or pass --use-env with NATS_URL/REDIS_URL`);
}

async function waitListening(c: Child, port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (!c.isRunning()) throw new Error(`${c.name} exited during start-up; last output:\n${c.tail()}`);
    if (await listening(port)) return;
    await sleep(50);
  }
  throw new Error(`${c.name} did not listen on 127.0.0.1:${port} within 10 s; last output:\n${c.tail()}`);
}

export async function startServers(tmpDir: string): Promise<Servers> {
  requireBinary('nats-server');
  requireBinary('redis-server');
  const [natsPort, redisPort, monitorPort] = await freePorts(3);
  if (natsPort === undefined || redisPort === undefined || monitorPort === undefined) throw new Error('no free ports');
  const nats = spawnChild('nats-server', 'nats-server', ['-a', '127.0.0.1', '-p', String(natsPort), '-m', String(monitorPort), '-js', '-sd', join(tmpDir, 'nats')]);
  const redis = spawnRedis('redis-server', redisPort, tmpDir);
  try {
    await Promise.all([waitListening(nats, natsPort), waitListening(redis, redisPort)]);
  } catch (e) {
    await Promise.all([nats.stop(), redis.stop()]);
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

function spawnRedis(name: string, port: number, dir: string): Child {
  // No persistence: the benchmark measures Triad, not Redis' disk.
  return spawnChild(name, 'redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir]);
}

/** One more private Redis (the scan measurement gives each size its own). */
export async function startRedis(name: string, tmpDir: string): Promise<{ url: string; stop(): Promise<void> }> {
  requireBinary('redis-server');
  const [port] = await freePorts(1);
  if (port === undefined) throw new Error('no free port');
  const redis = spawnRedis(name, port, tmpDir);
  try {
    await waitListening(redis, port);
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
