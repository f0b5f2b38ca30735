/**
 * Finds NATS and Redis at the configured URLs, or starts private ones (data under .triad/) when nothing
 * listens there — so `npm start` works on a fresh machine with only the two binaries installed.
 */
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { describeExit, listening, natsServerArgs, redisServerArgs, requireBinary, spawnTracked, terminate, waitListening, type TrackedChild } from '@triad/launcher';

export function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || '127.0.0.1', port: u.port ? Number(u.port) : defaultPort };
}

export interface StartedServer {
  name: string;
  child: TrackedChild;
}

/** How long a server started here gets to shut down (Redis: flush its append-only file) before SIGKILL. */
export const SERVER_STOP_GRACE_MS = 5_000;

interface PrivateServer {
  binary: 'nats-server' | 'redis-server';
  url: string;
  defaultPort: number;
  /** Data folder under the data dir. */
  folder: string;
  /** What else the user may do than install it. */
  orElse: string;
  args(host: string, port: number, dir: string): string[];
  /** Runs on the data folder before the server starts there (never while one already listens). */
  prepare?(dir: string): void;
}

/** Returns undefined when something already listens at the URL; otherwise starts the binary there. */
async function ensure(s: PrivateServer, dataDir: string): Promise<StartedServer | undefined> {
  const { host, port } = hostPort(s.url, s.defaultPort);
  if (await listening(host, port)) return undefined;
  const binary = requireBinary(s.binary, { by: 'by npm start (nothing listens at the configured URL)', orElse: s.orElse });
  const dir = join(dataDir, s.folder);
  mkdirSync(dir, { recursive: true });
  s.prepare?.(dir);
  const logFile = join(dataDir, 'logs', `${s.binary}.log`);
  const out = openSync(logFile, 'a');
  // Tracked by the launcher: killed with npm start however it ends, even by SIGKILL (its reaper).
  const child = await spawnTracked(binary, s.args(host, port, dir), { stdio: ['ignore', out, out] });
  try {
    await waitListening({
      host,
      port,
      name: s.binary,
      exited: () => {
        const status = child.exitStatus();
        return status === undefined ? undefined : `exited with ${describeExit(status)}`;
      },
      detail: () => `; see ${logFile}`,
    });
  } catch (e) {
    await terminate(child, SERVER_STOP_GRACE_MS);
    throw e;
  }
  return { name: s.binary, child };
}

/**
 * `configFile`: a nats-server configuration to start with (npm start's users); the flags win over it.
 * `prepare`: runs on its store folder before it starts (npm start moves streams into their account).
 */
export function ensureNats(url: string, dataDir: string, configFile?: string, prepare?: (dir: string) => void): Promise<StartedServer | undefined> {
  return ensure(
    {
      binary: 'nats-server',
      url,
      defaultPort: 4222,
      folder: 'nats',
      orElse: 'set NATS_URL to a running server',
      args: (host, port, dir) => natsServerArgs({ host, port, storeDir: dir, ...(configFile ? { configFile } : {}) }),
      ...(prepare ? { prepare } : {}),
    },
    dataDir,
  );
}

/** `aclFile`: Redis users to start with (npm start's; the default user off). */
export function ensureRedis(url: string, dataDir: string, aclFile?: string): Promise<StartedServer | undefined> {
  return ensure(
    {
      binary: 'redis-server',
      url,
      defaultPort: 6379,
      folder: 'redis',
      orElse: 'set REDIS_URL to a running server',
      args: (host, port, dir) => redisServerArgs({ host, port, dir, aof: 'everysec', ...(aclFile ? { aclFile } : {}) }),
    },
    dataDir,
  );
}
