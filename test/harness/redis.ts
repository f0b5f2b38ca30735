// Starts a real redis-server (AOF with fsync on every write by default) on a free port with its own directory.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireBinary } from './binaries.js';
import { freePort } from './ports.js';
import { redisReply } from './resp.js';
import { type ServerControl, ManagedServer } from './server.js';
import type { Teardown } from './teardown.js';

export interface StartRedisOptions {
  /** `--appendonly yes --appendfsync always`, so even a SIGKILL loses no acknowledged write; default true. */
  aof?: boolean;
  /** Registered (its stop()) as soon as the directory exists, before the first spawn. */
  teardown?: Teardown;
  /** Per start attempt; default 20 s. */
  readyTimeoutMs?: number;
}

/** A redis-server; restart() replays its AOF; while paused, connections are accepted by the kernel but nothing answers. */
export interface RedisServer extends ServerControl {
  /** redis://127.0.0.1:PORT — stays the same across restart(). */
  readonly url: string;
  readonly port: number;
  /** Passed as --dir; with AOF, Redis 7 keeps its files in `<dir>/appendonlydir`. */
  readonly dir: string;
}

const PROBE_TIMEOUT_MS = 1_000;

export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const binary = requireBinary('redis-server');
  const aof = opts.aof ?? true;
  const dir = await mkdtemp(join(tmpdir(), 'triad-redis-'));
  const server = new ManagedServer<{ port: number }>(
    {
      kind: 'redis-server',
      binary,
      readyTimeoutMs: opts.readyTimeoutMs ?? 20_000,
      allocatePorts: async () => ({ port: await freePort() }),
      args: ({ port }, serverDir) => [
        '--port', String(port), '--bind', '127.0.0.1', '--dir', serverDir, '--save', '',
        '--appendonly', aof ? 'yes' : 'no', ...(aof ? ['--appendfsync', 'always'] : []), '--daemonize', 'no',
      ],
      probe: async ({ port }, pid) => {
        const url = `redis://127.0.0.1:${port}`;
        // -LOADING while the AOF is replayed: not ready yet.
        if ((await redisReply(url, ['PING'], { timeoutMs: PROBE_TIMEOUT_MS })) !== 'PONG') return false;
        // Identity check: an unrelated Redis on a reused port would also say PONG.
        const info = await redisReply(url, ['INFO', 'server'], { timeoutMs: PROBE_TIMEOUT_MS });
        return typeof info === 'string' && new RegExp(`^process_id:${pid}\\r?$`, 'm').test(info);
      },
    },
    dir,
  );
  await server.launch(opts.teardown);
  const { port } = server.ports;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    ...server.controls(),
  };
}
