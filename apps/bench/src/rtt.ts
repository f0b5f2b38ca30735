/**
 * Round-trip floors on this machine at this moment: one Redis command (PING) and one JetStream
 * publish-with-ack, each awaited one at a time. A Triad step costs several of each in sequence, so
 * these say how low its latency could go with the round trips it makes today.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type { TriadClient } from '@triad/client';
import { encode, type TaskEvent } from '@triad/protocol';
import { percentile } from './timing.js';

export interface RttResult {
  redisPingP50Ms: number;
  jsPublishP50Ms: number;
}

export async function measureRtt(redis: Redis, client: TriadClient, samples = 200): Promise<RttResult> {
  const ping: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await redis.ping();
    ping.push(performance.now() - t);
  }
  // A well-formed event of a task that does not exist, into the namespace's events stream.
  const taskId = `rtt-probe-${process.pid}`;
  const pub: number[] = [];
  for (let i = 0; i < samples; i++) {
    const ev: TaskEvent = { taskId, seq: i + 1, type: 'received', at: Date.now() };
    const t = performance.now();
    await client.bus.js.publish(client.bus.names.subjects.event(taskId), encode(ev), { msgID: `${taskId}:ev:${i + 1}` });
    pub.push(performance.now() - t);
  }
  return { redisPingP50Ms: percentile(ping, 50), jsPublishP50Ms: percentile(pub, 50) };
}
