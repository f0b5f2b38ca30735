/**
 * A private redis-server for one store test file: started on a free port before the file's tests,
 * killed after them. (The store package cannot use the repository's test harness: that workspace
 * depends on this one.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import type { Redis } from 'ioredis';
import { connectRedis } from '../src/index.js';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => (port ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

async function kill(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
}

/**
 * Registers the file's beforeAll/afterAll and returns the accessor of the connection; `onStart` runs
 * once the server answers (e.g. to seed keys every test relies on).
 */
export function usePrivateRedis(connectionName: string, onStart?: (redis: Redis) => Promise<unknown>): () => Redis {
  let server: ChildProcess | undefined;
  let redis: Redis | undefined;

  beforeAll(async () => {
    let log = '';
    // A port can be taken between asking and binding: try a few.
    for (let attempt = 1; attempt <= 3 && !redis; attempt++) {
      const port = await freePort();
      const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
      server = child;
      const spawnError = new Promise<boolean>((resolve) =>
        child.once('error', (e) => {
          log += `\n${e.message}`;
          resolve(false);
        }),
      );
      child.stdout.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4_000)));
      child.stderr.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4_000)));
      const c = await connectRedis(`redis://127.0.0.1:${port}`, { connectionName });
      const up = await Promise.race([c.ping().then(() => true, () => false), spawnError, new Promise<boolean>((r) => setTimeout(() => r(false), 10_000))]);
      if (up && child.exitCode === null) redis = c;
      else {
        c.disconnect();
        await kill(child);
      }
    }
    if (!redis) {
      throw new Error(`redis-server did not start (is it on PATH? Debian/Ubuntu: apt-get install -y redis-server):\n${log}`);
    }
    if (onStart) await onStart(redis);
  });

  afterAll(async () => {
    if (redis) await redis.quit().catch(() => redis?.disconnect());
    await kill(server);
  });

  return () => {
    if (!redis) throw new Error('the private redis-server is not running (its beforeAll failed; see the first error)');
    return redis;
  };
}
