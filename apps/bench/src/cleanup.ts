/**
 * Removes what a run left in servers it did not start (--use-env): the namespace's Redis keys and
 * JetStream streams. The run's own servers are simply stopped, with their data.
 */
import type { Redis } from 'ioredis';
import type { TriadClient } from '@triad/client';

/** Bounded: at most this many SCAN calls (of up to 1000 keys each). */
const MAX_SCANS = 5_000;

export async function removeNamespace(redis: Redis, client: TriadClient, namespace: string): Promise<void> {
  // The scan measurement's `-scan` namespace shares the prefix; the BullMQ peer's queues are `bull-<ns>`.
  await removeKeys(redis, `triad:${namespace}*`);
  await removeKeys(redis, `bull-${namespace}:*`);
  const prefix = `TRIAD_${namespace}_`;
  for await (const s of client.bus.jsm.streams.list()) {
    if (s.config.name.startsWith(prefix)) await client.bus.jsm.streams.delete(s.config.name);
  }
}

/** Removes every key matching `pattern` (a SCAN MATCH pattern). */
export async function removeKeys(redis: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  for (let i = 0; i < MAX_SCANS; i++) {
    const [next, found] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    if (found.length > 0) await redis.unlink(...found);
    cursor = next;
    if (cursor === '0') break;
  }
}
