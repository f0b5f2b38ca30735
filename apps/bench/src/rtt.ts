/**
 * Round-trip floors on this machine at this moment, each awaited one at a time: one Redis command
 * (PING), one JetStream publish-with-ack, one JetStream publish until a pull consumer receives it, and
 * the Lua transition on a step's path (the scheduler's applyResult; agents hold no claim since decision
 * 0010) on probe tasks in a namespace of their own. A Triad step makes two of the deliveries and the
 * transition in sequence, so these say how low its latency could go with the hops it makes today.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type { TriadClient } from '@triad/client';
import { ensureConsumer } from '@triad/bus';
import { compilePlan, validateDefinition } from '@triad/core';
import { encode, type TaskEvent } from '@triad/protocol';
import { Leases, TaskStore } from '@triad/store';
import { removeKeys } from './cleanup.js';
import { percentile } from './timing.js';

export interface RttResult {
  redisPingP50Ms: number;
  jsPublishP50Ms: number;
  /** From the start of a publish until a pull consumer (on the same connection) has the message. */
  jsDeliveryP50Ms: number;
  applyResultP50Ms: number;
}

export async function measureRtt(redis: Redis, client: TriadClient, namespace: string, samples = 200): Promise<RttResult> {
  const ping: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await redis.ping();
    ping.push(performance.now() - t);
  }
  const { pub, delivery } = await measureJetStream(client, samples);
  const { apply } = await measureTransitions(redis, `${namespace}-probe`, samples);
  return {
    redisPingP50Ms: percentile(ping, 50),
    jsPublishP50Ms: percentile(pub, 50),
    jsDeliveryP50Ms: percentile(delivery, 50),
    applyResultP50Ms: percentile(apply, 50),
  };
}

/** Well-formed events of a task that does not exist, into the namespace's events stream. */
async function measureJetStream(client: TriadClient, samples: number): Promise<{ pub: number[]; delivery: number[] }> {
  const bus = client.bus;
  const taskId = `rtt-probe-${process.pid}`;
  const subject = bus.names.subjects.event(client.clientId, taskId);
  const pub: number[] = [];
  for (let i = 0; i < samples; i++) {
    const ev: TaskEvent = { taskId, seq: i + 1, type: 'received', at: Date.now() };
    const t = performance.now();
    await bus.js.publish(subject, encode(ev), { msgID: `${taskId}:ev:${i + 1}` });
    pub.push(performance.now() - t);
  }
  const durable = `rtt-probe-${process.pid}`;
  await ensureConsumer(bus, { stream: bus.names.streams.events, durable, filterSubject: subject, ackWaitMs: 30_000 });
  const consumer = await bus.js.consumers.get(bus.names.streams.events, durable);
  const messages = await consumer.consume({ max_messages: 32, expires: 2_000 });
  let received: (() => void) | undefined;
  let seen = 0;
  const reader = (async () => {
    for await (const m of messages) {
      m.ack();
      // The events published above are read first; only the probes below are timed.
      if (++seen > samples) received?.();
    }
  })();
  await waitUntil(() => seen >= samples);
  const delivery: number[] = [];
  for (let i = 0; i < samples; i++) {
    const n = samples + i + 1;
    const ev: TaskEvent = { taskId, seq: n, type: 'received', at: Date.now() };
    const got = new Promise<void>((r) => (received = r));
    const t = performance.now();
    const acked = bus.js.publish(subject, encode(ev), { msgID: `${taskId}:ev:${n}` });
    await got;
    delivery.push(performance.now() - t);
    await acked;
  }
  messages.stop();
  await reader;
  await bus.jsm.consumers.delete(bus.names.streams.events, durable).catch(() => undefined);
  return { pub, delivery };
}

/** The scheduler's applyResult on 1-step probe tasks, nothing else in between. */
async function measureTransitions(redis: Redis, namespace: string, samples: number): Promise<{ apply: number[] }> {
  const store = new TaskStore(redis, namespace);
  const leases = new Leases(redis, namespace);
  const plan = compilePlan(validateDefinition({ name: 'probe', steps: [{ name: 's', agent: 'probe', budgetMs: 600_000 }] }));
  const input = encode({});
  const apply: number[] = [];
  for (let i = 0; i < samples; i++) {
    const taskId = `probe-${i.toString().padStart(6, '0')}-0000-4000-8000-000000000000`;
    const created = leases.task(taskId);
    await store.createTask({ lease: created, taskId, workflow: 'probe', version: 1, input, plan, onFailure: 'error', client: 'bench', now: Date.now(), schedulerId: 'bench' });
    await leases.release(created);
    const lease = leases.task(taskId);
    const t = performance.now();
    await store.applyResult({ lease, taskId, step: 's', kind: 'run', attempt: 1, now: Date.now(), schedulerId: 'bench', agentId: 'bench', agentType: 'probe', outcome: { ok: true, output: input } });
    apply.push(performance.now() - t);
    await leases.release(lease);
  }
  // The probe namespace is the bench's own: remove what it wrote.
  await removeKeys(redis, `triad:${namespace}:*`);
  return { apply };
}

async function waitUntil(ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!ok()) {
    if (performance.now() > until) throw new Error('the round-trip probe consumer did not receive its messages in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
