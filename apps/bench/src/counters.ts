/**
 * Work counters around a measurement: Redis commands by type (INFO commandstats) and NATS messages
 * (the server's /varz), as deltas per step — how many round trips each step really costs.
 */
import type { Redis } from 'ioredis';

export interface Counters {
  redis: Map<string, number>;
  nats?: { inMsgs: number; outMsgs: number };
}

export interface CountersPerStep {
  steps: number;
  /** Redis calls per step, by command (only those with at least 0.05 per step). */
  redisPerStep: Record<string, number>;
  redisTotalPerStep: number;
  /** Messages into / out of nats-server per step (JetStream API, acks and pull requests included). */
  natsInPerStep?: number;
  natsOutPerStep?: number;
}

async function natsVarz(monitorUrl: string | undefined): Promise<Counters['nats']> {
  if (!monitorUrl) return undefined;
  try {
    const r = await fetch(`${monitorUrl}/varz`);
    const v = (await r.json()) as { in_msgs?: number; out_msgs?: number };
    return { inMsgs: v.in_msgs ?? 0, outMsgs: v.out_msgs ?? 0 };
  } catch {
    return undefined;
  }
}

/** Current counters; `redis` undefined leaves the Redis side empty (the baseline does not use Redis). */
export async function readCounters(redis: Redis | undefined, natsMonitorUrl: string | undefined): Promise<Counters> {
  const calls = new Map<string, number>();
  const info = redis ? await redis.info('commandstats') : '';
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] ?? '?', Number(m[2]));
  const nats = await natsVarz(natsMonitorUrl);
  return nats ? { redis: calls, nats } : { redis: calls };
}

export function perStep(before: Counters, after: Counters, steps: number): CountersPerStep {
  const redisPerStep: Record<string, number> = {};
  let total = 0;
  for (const [cmd, n] of after.redis) {
    const d = (n - (before.redis.get(cmd) ?? 0)) / steps;
    total += d;
    // info/commandstats are this measurement's own reads.
    if (d >= 0.05 && cmd !== 'info') redisPerStep[cmd] = Math.round(d * 100) / 100;
  }
  const out: CountersPerStep = { steps, redisPerStep, redisTotalPerStep: Math.round(total * 100) / 100 };
  if (before.nats && after.nats) {
    out.natsInPerStep = Math.round(((after.nats.inMsgs - before.nats.inMsgs) / steps) * 100) / 100;
    out.natsOutPerStep = Math.round(((after.nats.outMsgs - before.nats.outMsgs) / steps) * 100) / 100;
  }
  return out;
}
