/**
 * A private redis-server for one store test file: started on a free port before the file's tests,
 * stopped after them, through @triad/launcher (the binary found or its install hint given, the child
 * never outliving the test worker). The store package cannot use the repository's test harness: that
 * workspace depends on this one.
 */
import { freePort, requireBinary, startProcess, waitListening, type StartedProcess } from '@triad/launcher';
import { afterAll, beforeAll } from 'vitest';
import type { Redis } from 'ioredis';
import { connectRedis } from '../src/index.js';

const BY = { by: "by the store package's tests" };

/**
 * Registers the file's beforeAll/afterAll and returns the accessor of the connection; `onStart` runs
 * once the server answers (e.g. to seed keys every test relies on).
 */
export function usePrivateRedis(connectionName: string, onStart?: (redis: Redis) => Promise<unknown>): () => Redis {
  let server: StartedProcess | undefined;
  let redis: Redis | undefined;

  beforeAll(async () => {
    const binary = requireBinary('redis-server', BY);
    const failures: string[] = [];
    // A port can be taken between asking and binding: try a few.
    for (let attempt = 1; attempt <= 3 && !redis; attempt++) {
      const port = await freePort();
      const child = await startProcess({ name: `redis-server :${port}`, command: binary, args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'] });
      server = child;
      try {
        await waitListening({ host: '127.0.0.1', port, name: child.name, exited: () => (child.isRunning() ? undefined : 'exited during start-up'), detail: () => `; last output:\n${child.tail(2_000)}` });
        redis = await connectRedis(`redis://127.0.0.1:${port}`, { connectionName });
      } catch (e) {
        failures.push(e instanceof Error ? e.message : String(e));
        await child.stop();
      }
    }
    if (!redis) throw new Error(`redis-server did not start in 3 tries:\n${failures.join('\n')}`);
    if (onStart) await onStart(redis);
  });

  afterAll(async () => {
    if (redis) await redis.quit().catch(() => redis?.disconnect());
    await server?.kill();
  });

  return () => {
    if (!redis) throw new Error('the private redis-server is not running (its beforeAll failed; see the first error)');
    return redis;
  };
}
