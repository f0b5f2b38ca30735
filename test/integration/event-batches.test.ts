/**
 * Event batches to reply subjects (decision 0025), against real NATS and Redis with a scheduler and an
 * agent host in this process:
 * - tasks sharing a reply subject that reads batches (the SDK's replySubject(), last token `b~…`) get
 *   every event of theirs, each once and in seq order, in fewer messages than transitions; the history
 *   (task.events) and a watch read each task's events by its own subject as before;
 * - a plain reply subject (an old reader) gets one `{ taskId, events }` message per transition;
 * - with batches off (TRIAD_EVENT_BATCHES=off) a `b~` subject gets one message per transition too;
 * - a submission naming another client's `b~` subject is refused, and that client gets nothing.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { AgentHost, defineAgent } from '@triad/agent';
import type { Bus } from '@triad/bus';
import { TriadClient } from '@triad/client';
import { workflow } from '@triad/core';
import { TaskEventBatchSchema, decode, decodeTaskEventMessage, unpackTrusted, type TaskEvent } from '@triad/protocol';
import { Scheduler } from '@triad/scheduler';
import { Leases, TaskStore, connectRedis } from '@triad/store';
import { uniqueNamespace, waitFor, withTeardown } from '../harness/index.js';
import { busServers } from '../support/bus-servers.js';

const td = withTeardown(afterAll);
const servers = busServers(td);
const connect = (namespace: string, name: string): Promise<Bus> => servers.connect(namespace, name);

/** A scheduler (event batches on or off), an agent `ev` and the 3-step workflow `evs` in `namespace`. */
async function startTriad(namespace: string, eventBatches: boolean): Promise<{ client: TriadClient; bus: Bus }> {
  const config = servers.config(namespace);
  const redisConn = await connectRedis(config.redis);
  td.add(() => void redisConn.disconnect());
  const scheduler = new Scheduler({ bus: await connect(namespace, 'e-scheduler'), tasks: new TaskStore(redisConn, namespace), leases: new Leases(redisConn, namespace), eventBatches });
  await scheduler.start();
  td.add(() => scheduler.stop());
  const host = new AgentHost({ bus: await connect(namespace, 'e-agent'), agents: [defineAgent({ name: 'ev', handler: () => Promise.resolve({ ok: true }) })] });
  await host.start();
  td.add(() => host.stop());
  const client = await TriadClient.connect({ natsUrl: servers.nats.url, namespace });
  td.add(() => client.close());
  await client.registerWorkflow(
    workflow('evs')
      .step('a', { agent: 'ev', budgetMs: 20_000 })
      .step('b', { agent: 'ev', budgetMs: 20_000 })
      .step('c', { agent: 'ev', budgetMs: 20_000 }),
  );
  return { client, bus: await connect(namespace, 'e-watch') };
}

/** Every raw message on `subject`, as it arrives (a second subscriber beside the reader). */
function record(bus: Bus, subject: string): Uint8Array[] {
  const got: Uint8Array[] = [];
  bus.nc.subscribe(subject, { callback: (_e, m) => void got.push(m.data) });
  return got;
}

/** Submits `n` tasks at once with `replyTo` and waits until each has its `completed` event among `events`. */
async function runAll(client: TriadClient, n: number, replyTo: string, events: () => TaskEvent[]): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `ev-${i}-${Date.now()}`);
  await Promise.all(ids.map((taskId) => client.submit('evs', { i: taskId }, { taskId, replyTo })));
  await waitFor(
    () => {
      const done = new Set(events().filter((e) => e.type === 'completed').map((e) => e.taskId));
      return ids.every((id) => done.has(id)) ? true : undefined;
    },
    { timeoutMs: 60_000, what: `the completed events of ${n} tasks` },
  );
  return ids;
}

/** Each task's events in arrival order: seq 1, 2, 3… without a gap or a repeat, ending with `completed`. */
function expectWhole(ids: string[], events: TaskEvent[]): void {
  for (const id of ids) {
    const mine = events.filter((e) => e.taskId === id);
    expect(mine.map((e) => e.seq), id).toEqual(mine.map((_, i) => i + 1));
    expect(mine[0]?.type).toBe('received');
    expect(mine.at(-1)?.type).toBe('completed');
  }
}

/** The messages' shapes: how many are batches, and how many transitions they carried in all. */
function shapes(raw: Uint8Array[]): { batches: number; singles: number; transitions: number } {
  let batches = 0;
  let transitions = 0;
  for (const b of raw) {
    const v = unpackTrusted(b) as { batches?: unknown[] };
    if (Array.isArray(v.batches)) {
      batches++;
      transitions += v.batches.length;
    } else transitions++;
  }
  return { batches, singles: raw.length - batches, transitions };
}

describe('event batches to reply subjects', () => {
  it("tasks sharing a reply subject that reads batches get all their events, in order, in fewer messages; history and watch unchanged", async () => {
    const namespace = uniqueNamespace('evb');
    const { client, bus } = await startTriad(namespace, true);
    const reply = client.replySubject();
    expect(reply.subject).toMatch(new RegExp(`^_INBOX\\.${namespace}\\.default\\.b~`));
    const raw = record(bus, reply.subject);
    await bus.nc.flush();
    const events: TaskEvent[] = [];
    void (async () => {
      for await (const ev of reply.events) events.push(ev);
    })();
    const ids = await runAll(client, 60, reply.subject, () => events);
    reply.close();
    expectWhole(ids, events);
    const s = shapes(raw);
    expect(s.batches, JSON.stringify(s)).toBeGreaterThan(0);
    // Every message is either shape and every element is a valid transition of a task of ours.
    for (const b of raw) {
      const d = decodeTaskEventMessage(b);
      expect(d.ok).toBe(true);
      if (d.ok) for (const t of d.value) expect(t.ok && ids.includes(t.value.taskId)).toBe(true);
    }
    // 60 tasks × 4 transitions (the submission, three step results): fewer messages.
    expect(s.transitions).toBe(ids.length * 4);
    expect(raw.length).toBeLessThan(s.transitions);
    // The history is stored per task, as before: task.events and a watch read it by the task's subject.
    const page = await client.taskEvents(ids[7] ?? '');
    expect(page.events.map((e) => e.seq)).toEqual(events.filter((e) => e.taskId === ids[7]).map((e) => e.seq));
    const watched: TaskEvent[] = [];
    for await (const ev of client.watch(ids[3] ?? '')) watched.push(ev);
    expect(watched.at(-1)?.type).toBe('completed');
  });

  it('a plain reply subject (a reader that did not announce batches) gets one message per transition', async () => {
    const namespace = uniqueNamespace('evp');
    const { client, bus } = await startTriad(namespace, true);
    const subject = `${bus.names.subjects.inboxPrefix('default')}.plain-${Date.now()}`;
    const raw = record(bus, subject);
    await bus.nc.flush();
    const events = (): TaskEvent[] =>
      raw.flatMap((b) => {
        const d = decode(b, TaskEventBatchSchema, 'task events');
        return d.ok ? d.value.events : [];
      });
    const ids = await runAll(client, 40, subject, events);
    expectWhole(ids, events());
    expect(shapes(raw)).toEqual({ batches: 0, singles: ids.length * 4, transitions: ids.length * 4 });
  });

  it('with event batches off, a reply subject that reads batches gets one message per transition', async () => {
    const namespace = uniqueNamespace('evoff');
    const { client, bus } = await startTriad(namespace, false);
    const reply = client.replySubject();
    const raw = record(bus, reply.subject);
    await bus.nc.flush();
    const events: TaskEvent[] = [];
    void (async () => {
      for await (const ev of reply.events) events.push(ev);
    })();
    const ids = await runAll(client, 40, reply.subject, () => events);
    reply.close();
    expectWhole(ids, events);
    expect(shapes(raw)).toEqual({ batches: 0, singles: ids.length * 4, transitions: ids.length * 4 });
  });

  it("a submission naming another client's batch reply subject is refused; that client gets nothing", async () => {
    const namespace = uniqueNamespace('evx');
    const { bus } = await startTriad(namespace, true);
    const alice = await TriadClient.connect({ natsUrl: servers.nats.url, namespace, clientId: 'alice' });
    td.add(() => alice.close());
    const mallory = await TriadClient.connect({ natsUrl: servers.nats.url, namespace, clientId: 'mallory' });
    td.add(() => mallory.close());
    const aliceReply = alice.replySubject();
    const raw = record(bus, aliceReply.subject);
    await bus.nc.flush();
    const { taskId } = await mallory.submit('evs', {}, { taskId: `evx-${Date.now()}`, replyTo: aliceReply.subject });
    const err = await mallory.wait(taskId, { timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(String(err)).toMatch(/is not in client mallory's inbox/);
    await bus.nc.flush();
    expect(raw).toEqual([]);
    aliceReply.close();
  });
});
