/**
 * Step request batches (decision 0023), against real NATS and Redis with a scheduler and agent hosts in
 * this process:
 * - a batch with malformed items dead-letters only those items, each with its own bytes, and runs and
 *   reports the rest; the batch is acknowledged once every item is settled;
 * - an agent that takes batches gets them (the scheduler sees its `batch-<agent>` durable waiting);
 * - an agent that does not announce gets single requests only, and its tasks complete;
 * - a mixed fleet of one type (one process takes batches, one does not) completes every task.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { AgentHost, defineAgent, type AgentDefinition } from '@triad/agent';
import { AckPolicy } from '@nats-io/jetstream';
import { ensureStreams, type Bus } from '@triad/bus';
import { TriadClient } from '@triad/client';
import { workflow } from '@triad/core';
import { decodeResults, decodeStepRequests, encode, type StepRequest, type StepResult } from '@triad/protocol';
import { BatchTakers, Scheduler, StepSender } from '@triad/scheduler';
import { Leases, TaskStore, connectRedis } from '@triad/store';
import { uniqueNamespace, waitFor, withTeardown } from '../harness/index.js';
import { busServers } from '../support/bus-servers.js';
import { deadLetters, waitForDeadLetter } from '../support/dead-letters.js';

const td = withTeardown(afterAll);
const servers = busServers(td);
const connect = (namespace: string, name: string): Promise<Bus> => servers.connect(namespace, name);

async function startHost(bus: Bus, agents: AgentDefinition[], takeBatches: boolean): Promise<AgentHost> {
  const host = new AgentHost({ bus, agents, takeBatches });
  await host.start();
  td.add(() => host.stop());
  await host.attached;
  return host;
}

/** A scheduler and a client in `namespace`, and a count of the step messages by subject. */
async function startTriad(namespace: string): Promise<{ client: TriadClient; bus: Bus; subjects: Map<string, number> }> {
  const config = servers.config(namespace);
  const redisConn = await connectRedis(config.redis);
  td.add(() => void redisConn.disconnect());
  const scheduler = new Scheduler({ bus: await connect(namespace, 'b-scheduler'), tasks: new TaskStore(redisConn, namespace), leases: new Leases(redisConn, namespace) });
  await scheduler.start();
  td.add(() => scheduler.stop());
  const bus = await connect(namespace, 'b-watch');
  const subjects = new Map<string, number>();
  // Every step message the scheduler publishes, by subject (a core subscription sees JetStream publishes).
  bus.nc.subscribe(`triad.${namespace}.step.>`, { callback: (_e, m) => void subjects.set(m.subject, (subjects.get(m.subject) ?? 0) + 1) });
  await bus.nc.flush();
  const client = await TriadClient.connect({ natsUrl: servers.nats.url, namespace });
  td.add(() => client.close());
  return { client, bus, subjects };
}

const twoSteps = (agent: string) =>
  workflow('batched')
    .defaults({ retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 } })
    .step('one', { agent, budgetMs: 20_000 })
    .step('two', { agent, budgetMs: 20_000 });

/** Runs waves of `size` tasks at once until `until()` holds (at most `waves`); every task must complete. */
async function runWaves(client: TriadClient, size: number, waves: number, until: () => boolean): Promise<number> {
  let ran = 0;
  for (let w = 0; w < waves; w++) {
    const states = await Promise.all(Array.from({ length: size }, (_, i) => client.run('batched', { n: ran + i }, { timeoutMs: 60_000 })));
    for (const s of states) expect(s.status, s.taskId).toBe('completed');
    ran += size;
    if (until()) break;
  }
  return ran;
}

function request(namespace: string, agent: string, taskId: string, over: Partial<StepRequest> = {}): StepRequest {
  const now = Date.now();
  return { taskId, workflow: 'batched', version: 1, step: 'one', agent, kind: 'run', attempt: 1, idempotencyKey: `${namespace}/${taskId}/one`, completeBy: now + 20_000, input: { taskId }, needs: {}, dispatchedAt: now, ...over };
}

describe('step request batches', () => {
  it('a batch with malformed items dead-letters only those items, with their own bytes, and runs and reports the rest', async () => {
    const namespace = uniqueNamespace('sbdl');
    const bus = await connect(namespace, 'b-agent');
    await ensureStreams(bus);
    const ran: string[] = [];
    const agent = defineAgent({ name: 'bpay', handler: ({ input }) => { ran.push((input as { taskId: string }).taskId); return Promise.resolve({ ok: true }); } });
    await startHost(bus, [agent], true);
    const n = bus.names;
    const results: StepResult[] = [];
    bus.nc.subscribe(n.subjects.result('bpay'), {
      callback: (_e, m) => {
        const d = decodeResults(m.data);
        if (d.ok) for (const it of d.value.items) if (it.ok) results.push(it.value);
      },
    });
    await bus.nc.flush();

    const good1 = encode(request(namespace, 'bpay', 'ok-1'));
    const garbage = new Uint8Array([0xc1, 0xba, 0xd0]);
    const invalid = encode({ taskId: 'bad-2', step: 7 });
    const foreign = encode(request(namespace, 'other', 'foreign-3'));
    const good2 = encode(request(namespace, 'bpay', 'ok-2'));
    const late = encode(request(namespace, 'bpay', 'late-1', { completeBy: Date.now() - 1_000 }));
    await bus.js.publish(n.subjects.stepBatch('bpay'), encode({ requests: [good1, garbage, invalid, foreign, good2, late] }));

    await waitFor(() => (results.length >= 2 ? results : undefined), { timeoutMs: 15_000, what: 'the results of the two good items' });
    expect(results.map((r) => r.taskId).sort()).toEqual(['ok-1', 'ok-2']);
    expect(results.every((r) => r.ok && r.attempt === 1)).toBe(true);
    expect(ran.sort()).toEqual(['ok-1', 'ok-2']);

    await waitForDeadLetter(bus, (d) => d.original.length === invalid.length && Buffer.from(d.original).equals(Buffer.from(invalid)), 'the invalid item');
    const dls = await waitFor(
      async () => {
        const all = await deadLetters(bus);
        return all.length >= 3 ? all : undefined;
      },
      { timeoutMs: 15_000, what: 'three dead letters' },
    );
    expect(dls).toHaveLength(3);
    for (const d of dls) expect(d).toMatchObject({ source: 'step.bpay', subject: n.subjects.step('bpay') });
    const originals = dls.map((d) => Buffer.from(d.original).toString('hex')).sort();
    expect(originals).toEqual([garbage, invalid, foreign].map((b) => Buffer.from(b).toString('hex')).sort());
    expect(dls.find((d) => Buffer.from(d.original).equals(Buffer.from(garbage)))?.reason).toMatch(/step request 2 of 6 in a batch/);
    expect(dls.find((d) => Buffer.from(d.original).equals(Buffer.from(foreign)))?.reason).toMatch(/names agent "other"/);

    // The batch is acknowledged once every item is settled: nothing pending on the batch durable.
    await waitFor(
      async () => {
        const ci = await bus.jsm.consumers.info(n.streams.steps, n.consumers.agentBatch('bpay'));
        return ci.num_pending === 0 && ci.num_ack_pending === 0 ? ci : undefined;
      },
      { timeoutMs: 15_000, what: 'the batch acknowledged' },
    );
    // A message that is not a batch at all is dead-lettered whole.
    await bus.js.publish(n.subjects.stepBatch('bpay'), good1);
    const whole = await waitForDeadLetter(bus, (d) => d.reason.includes('step request batch'), 'the non-batch on the batch subject');
    expect(whole.subject).toBe(n.subjects.stepBatch('bpay'));
    expect(ran.sort()).toEqual(['ok-1', 'ok-2']);
  });

  it('an agent that takes batches gets batches; its tasks complete', async () => {
    const namespace = uniqueNamespace('sbon');
    const { client, bus, subjects } = await startTriad(namespace);
    let runs = 0;
    await startHost(await connect(namespace, 'b-agent'), [defineAgent({ name: 'bon', handler: () => Promise.resolve({ run: ++runs }) })], true);
    await client.registerWorkflow(twoSteps('bon'));
    const batchSubject = bus.names.subjects.stepBatch('bon');
    const ran = await runWaves(client, 40, 8, () => (subjects.get(batchSubject) ?? 0) > 0);
    expect(subjects.get(batchSubject) ?? 0, JSON.stringify([...subjects])).toBeGreaterThan(0);
    expect(runs).toBe(ran * 2);
    expect(await deadLetters(bus)).toEqual([]);
  });

  it('an agent that does not announce gets single requests only; its tasks complete', async () => {
    const namespace = uniqueNamespace('sboff');
    const { client, bus, subjects } = await startTriad(namespace);
    await startHost(await connect(namespace, 'b-agent'), [defineAgent({ name: 'boff', handler: () => Promise.resolve({ ok: true }) })], false);
    await client.registerWorkflow(twoSteps('boff'));
    const ran = await runWaves(client, 40, 3, () => false);
    expect(subjects.get(bus.names.subjects.stepBatch('boff')) ?? 0).toBe(0);
    expect(subjects.get(bus.names.subjects.step('boff'))).toBe(ran * 2);
    const names: string[] = [];
    for await (const c of bus.jsm.consumers.list(bus.names.streams.steps)) names.push(c.name);
    expect(names).toEqual([bus.names.consumers.agent('boff')]);
    expect(await deadLetters(bus)).toEqual([]);
  });

  it('a mixed fleet of one type (one process takes batches, one does not) completes every task, each step once', async () => {
    const namespace = uniqueNamespace('sbmix');
    const { client, bus, subjects } = await startTriad(namespace);
    const byHost = { batches: 0, singles: 0 };
    const seen = new Map<string, number>();
    const def = (host: keyof typeof byHost): AgentDefinition =>
      defineAgent({
        name: 'bmix',
        handler: ({ input, step }) => {
          byHost[host]++;
          const k = `${(input as { n: number }).n}:${step}`;
          seen.set(k, (seen.get(k) ?? 0) + 1);
          return Promise.resolve({ ok: true });
        },
      });
    await startHost(await connect(namespace, 'b-new'), [def('batches')], true);
    await startHost(await connect(namespace, 'b-old'), [def('singles')], false);
    await client.registerWorkflow(twoSteps('bmix'));
    const batchSubject = bus.names.subjects.stepBatch('bmix');
    const ran = await runWaves(client, 40, 8, () => (subjects.get(batchSubject) ?? 0) > 0);
    expect(subjects.get(batchSubject) ?? 0).toBeGreaterThan(0);
    expect(byHost.batches + byHost.singles).toBe(ran * 2);
    expect([...seen.values()].every((c) => c === 1)).toBe(true);
    expect(await deadLetters(bus)).toEqual([]);
  });
});

describe('the scheduler side of step request batches', () => {
  it('a turn\'s requests to a type that takes batches go as batches of at most the maximum, without a message id; a request alone in its turn goes alone with its own', async () => {
    const namespace = uniqueNamespace('sbsend');
    const bus = await connect(namespace, 'b-sender');
    await ensureStreams(bus);
    const seen: { subject: string; msgId: string | undefined; items: number }[] = [];
    bus.nc.subscribe(`triad.${namespace}.step.>`, {
      callback: (_e, m) => {
        const d = m.subject.includes('.step.b~') ? decodeStepRequests(m.data) : undefined;
        seen.push({ subject: m.subject, msgId: m.headers?.get('Nats-Msg-Id') || undefined, items: d?.ok ? d.value.length : 1 });
      },
    });
    await bus.nc.flush();
    const sender = new StepSender(bus, { takes: (agent) => agent === 'taker' }, 64);
    const req = (i: number, agent = 'taker'): Uint8Array => encode(request(namespace, agent, `t-${i}`));
    // 70 in one turn to a type that takes batches, 3 to one that does not.
    await Promise.all([
      ...Array.from({ length: 70 }, (_, i) => sender.send('taker', req(i), `t-${i}:one:run:1`)),
      ...Array.from({ length: 3 }, (_, i) => sender.send('plain', req(i, 'plain'), `p-${i}:one:run:1`)),
    ]);
    // One alone in its turn.
    await sender.send('taker', req(99), 't-99:one:run:1');
    await waitFor(() => (seen.length >= 6 ? true : undefined), { timeoutMs: 10_000, what: 'the six messages' });
    const n = bus.names;
    const batches = seen.filter((m) => m.subject === n.subjects.stepBatch('taker'));
    expect(batches.map((b) => b.items).sort((a, b) => a - b)).toEqual([6, 64]);
    expect(batches.every((b) => b.msgId === undefined)).toBe(true);
    const singles = seen.filter((m) => m.subject !== n.subjects.stepBatch('taker'));
    expect(singles.map((m) => ({ subject: m.subject, msgId: m.msgId })).sort((a, b) => (a.msgId ?? '').localeCompare(b.msgId ?? ''))).toEqual([
      { subject: n.subjects.step('plain'), msgId: 'p-0:one:run:1' },
      { subject: n.subjects.step('plain'), msgId: 'p-1:one:run:1' },
      { subject: n.subjects.step('plain'), msgId: 'p-2:one:run:1' },
      { subject: n.subjects.step('taker'), msgId: 't-99:one:run:1' },
    ]);
    expect(sender.stats).toEqual({ messages: 6, requests: 74, batches: 2 });
    // Every request stored: 70 in two batches, 4 alone.
    expect((await bus.jsm.streams.info(n.streams.steps)).state.messages).toBe(6);
  });

  it('an agent type takes batches while its batch durable has a pull waiting, and not before', async () => {
    const namespace = uniqueNamespace('sbtake');
    const bus = await connect(namespace, 'b-takers');
    await ensureStreams(bus);
    const takers = new BatchTakers(bus);
    await takers.read();
    expect(takers.takes('bt')).toBe(false);
    const n = bus.names;
    await bus.jsm.consumers.add(n.streams.steps, { durable_name: n.consumers.agentBatch('bt'), filter_subject: n.subjects.stepBatch('bt'), ack_policy: AckPolicy.Explicit });
    await takers.read();
    // The durable alone is no announcement: nobody pulls from it.
    expect(takers.takes('bt')).toBe(false);
    const consumer = await bus.js.consumers.get(n.streams.steps, n.consumers.agentBatch('bt'));
    const pulling = await consumer.consume({ max_messages: 1, expires: 10_000 });
    td.add(() => pulling.stop());
    // Iterating is what keeps a pull outstanding.
    void (async () => {
      for await (const m of pulling) m.ack();
    })();
    await waitFor(async () => ((await bus.jsm.consumers.info(n.streams.steps, n.consumers.agentBatch('bt'))).num_waiting > 0 ? true : undefined), { timeoutMs: 10_000, what: 'a pull waiting' });
    await takers.read();
    expect(takers.takes('bt')).toBe(true);
    expect(takers.takes('other')).toBe(false);
  });
});
