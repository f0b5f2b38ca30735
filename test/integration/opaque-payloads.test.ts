/**
 * Payloads carried through the scheduler as bytes (decision 0025, "other levers"), against real NATS and
 * Redis with a scheduler and an agent host in this process: a submission and results of several KiB —
 * above OPAQUE_PAYLOAD_MIN_BYTES, so the scheduler decodes them without their input/output — keep every
 * value exact through two steps (the output of one is the need of the next) and back to the client; and
 * a payload nested deeper than the limit is still refused with the reason a whole decode gives, both in a
 * submission (a rejected event) and in a result (a dead letter).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { AgentHost, defineAgent } from '@triad/agent';
import type { Bus } from '@triad/bus';
import { TriadClient } from '@triad/client';
import { workflow } from '@triad/core';
import { MAX_NESTING_DEPTH, OPAQUE_PAYLOAD_MIN_BYTES, encode, type TaskEvent } from '@triad/protocol';
import { Scheduler } from '@triad/scheduler';
import { Leases, TaskStore, connectRedis } from '@triad/store';
import { uniqueNamespace, waitFor, withTeardown } from '../harness/index.js';
import { busServers } from '../support/bus-servers.js';
import { waitForDeadLetter } from '../support/dead-letters.js';

const td = withTeardown(afterAll);
const servers = busServers(td);
const connect = (namespace: string, name: string): Promise<Bus> => servers.connect(namespace, name);

/** A record list of about `bytes` encoded bytes, with integers, floats, strings, nulls and nested maps (no −0: it travels as the integer 0). */
function records(bytes: number): { lines: { sku: string; qty: number; price: number; note: string | null; dims: { w: number; h: number } }[] } {
  const lines = [];
  for (let i = 0; i * 48 < bytes; i++) lines.push({ sku: `sku-${i}`, qty: i % 7, price: i * 1.25, note: i % 3 === 0 ? null : `n${i}`, dims: { w: i, h: i === 0 ? 0 : -i } });
  return { lines };
}

/** A value `levels` arrays deep around a string long enough to make its message take the opaque path. */
function nested(levels: number): unknown {
  let v: unknown = 'x'.repeat(OPAQUE_PAYLOAD_MIN_BYTES);
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

describe('payloads carried as bytes through the scheduler', () => {
  it('keeps inputs, outputs and needs of several KiB exact through two steps, and refuses a payload nested too deep in a submission and in a result', async () => {
    const namespace = uniqueNamespace('opq');
    const config = servers.config(namespace);
    const redisConn = await connectRedis(config.redis);
    td.add(() => void redisConn.disconnect());
    const scheduler = new Scheduler({ bus: await connect(namespace, 'o-scheduler'), tasks: new TaskStore(redisConn, namespace), leases: new Leases(redisConn, namespace) });
    await scheduler.start();
    td.add(() => scheduler.stop());
    const echo = defineAgent({
      name: 'echo',
      handler: ({ input, needs, step }) => {
        const i = input as { payload: unknown; deep?: boolean };
        if (step === 'first') return Promise.resolve(i.deep ? nested(MAX_NESTING_DEPTH) : i.payload);
        return Promise.resolve({ back: needs['first'] });
      },
    });
    const host = new AgentHost({ bus: await connect(namespace, 'o-agent'), agents: [echo] });
    await host.start();
    td.add(() => host.stop());
    const client = await TriadClient.connect({ natsUrl: servers.nats.url, namespace });
    td.add(() => client.close());
    await client.registerWorkflow(
      workflow('opq')
        .defaults({ retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 } })
        .step('first', { agent: 'echo', budgetMs: 20_000 })
        .step('second', { agent: 'echo', budgetMs: 20_000, dependsOn: ['first'], needs: ['first'] }),
    );

    const payload = records(12_000);
    expect(encode(payload).length).toBeGreaterThan(OPAQUE_PAYLOAD_MIN_BYTES * 4);
    const state = await client.run('opq', { payload }, { timeoutMs: 60_000 });
    expect(state.status).toBe('completed');
    expect(state.steps.find((s) => s.name === 'first')?.output).toEqual(payload);
    expect(state.steps.find((s) => s.name === 'second')?.output).toEqual({ back: payload });

    // A submission whose input nests one level too deep: rejected with the whole decode's reason.
    const reply = client.replySubject();
    const events: TaskEvent[] = [];
    void (async () => {
      for await (const ev of reply.events) events.push(ev);
    })();
    const bus = await connect(namespace, 'o-raw');
    await bus.js.publish(bus.names.subjects.submit('default'), encode({ taskId: 'too-deep', workflow: 'opq', submittedAt: Date.now(), replyTo: reply.subject, input: nested(MAX_NESTING_DEPTH) }));
    const rejected = await waitFor(() => events.find((e) => e.taskId === 'too-deep' && e.type === 'rejected'), { timeoutMs: 15_000, what: 'the rejection of the too-deep submission' });
    expect(rejected.reason).toMatch(new RegExp(`nested more than ${MAX_NESTING_DEPTH} levels deep`));
    reply.close();

    // A result whose output nests too deep: dead-lettered with that reason; the task fails (no retry left).
    const { taskId } = await client.submit('opq', { payload: 1, deep: true });
    const dl = await waitForDeadLetter(bus, (d) => d.source === 'result' && /nested more than/.test(d.reason), 'the too-deep result');
    expect(dl.reason).toMatch(new RegExp(`nested more than ${MAX_NESTING_DEPTH} levels deep`));
    expect((await client.getTask(taskId)).status).not.toBe('completed');
  });
});
