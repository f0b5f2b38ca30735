// The bus on a real nats-server: streams and consumers are created idempotently (twice is a no-op,
// a changed setting is applied), and a message that keeps failing is dead-lettered with its bytes and
// the reason once it passes the redelivery limit, while the consumer moves on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliverPolicy } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { connectBus, ensureConsumer, ensureStreams, startConsumer, type Bus } from '@triad/bus';
import { DeadLetterSchema, ErrorCode, TriadError, decode } from '@triad/protocol';
import { startNats, uniqueNamespace, waitFor, withTeardown, type NatsServer } from '../harness/index.js';

const td = withTeardown(afterAll);
let nats: NatsServer;

beforeAll(async () => {
  nats = await startNats({ teardown: td });
});

async function bus(): Promise<Bus> {
  const b = await connectBus({ url: nats.url, namespace: uniqueNamespace('bus'), name: 'bus-test' });
  td.add(() => b.close());
  return b;
}

describe('bus', () => {
  it('a JetStream API that never answers at connect is reported with what to check, not as a bare "timeout"', async () => {
    // A NATS server without JetStream, where something takes $JS.API.INFO and never answers: what a
    // JetStream stuck without a quorum looks like to a client (no "no responders", no answer).
    const silent = await startNats({ teardown: td, jetstream: false });
    const squatter = await connect({ servers: silent.url });
    td.add(() => squatter.close());
    squatter.subscribe('$JS.API.>', { callback: () => undefined });
    await squatter.flush();
    const err = await connectBus({ url: silent.url, namespace: uniqueNamespace('silent'), name: 'bus-test' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TriadError);
    expect((err as TriadError).code).toBe(ErrorCode.Unavailable);
    expect((err as TriadError).message).toMatch(/^the JetStream API of NATS at nats:\/\/127\.0\.0\.1:\d+ timed out at connect \(no answer within 10 s\): check that nats-server runs with JetStream enabled/);
  }, 30_000);

  it('creates streams and consumers idempotently and applies a changed setting as an update', async () => {
    const b = await bus();
    await ensureStreams(b);
    await ensureStreams(b);
    await ensureStreams(b, { eventsMaxAgeMs: 3_600_000 });
    const events = await b.jsm.streams.info(b.names.streams.events);
    expect(events.config.max_age).toBe(3_600_000 * 1_000_000);
    const spec = { stream: b.names.streams.results, durable: 'r', filterSubject: b.names.subjects.resultAll, ackWaitMs: 30_000 };
    await ensureConsumer(b, spec);
    await ensureConsumer(b, spec);
    await ensureConsumer(b, { ...spec, ackWaitMs: 10_000 });
    const ci = await b.jsm.consumers.info(b.names.streams.results, 'r');
    expect(ci.config.ack_wait).toBe(10_000 * 1_000_000);
  });

  it('dead-letters a message redelivered past the limit, with its bytes and the reason; the next message is handled', async () => {
    const b = await bus();
    await ensureStreams(b);
    await ensureConsumer(b, { stream: b.names.streams.commands, durable: 'c', filterSubject: b.names.subjects.command, ackWaitMs: 30_000 });
    const handled: string[] = [];
    const consumer = startConsumer(b, { stream: b.names.streams.commands, durable: 'c', source: 'command', maxDeliveries: 3 }, (d) => {
      const text = new TextDecoder().decode(d.data);
      if (text === 'poison') return Promise.reject(new Error('cannot handle this'));
      handled.push(text);
      return Promise.resolve('ack' as const);
    });
    td.add(() => consumer.stop());
    await consumer.ready;
    await b.js.publish(b.names.subjects.command, new TextEncoder().encode('poison'));
    await b.js.publish(b.names.subjects.command, new TextEncoder().encode('fine'));
    await waitFor(() => handled.includes('fine') || undefined, { timeoutMs: 10_000, what: 'the good message' });
    const dl = await waitFor(
      async () => {
        const info = await b.jsm.streams.info(b.names.streams.deadLetters);
        if (info.state.messages === 0) return undefined;
        const c = await b.js.consumers.get(b.names.streams.deadLetters, { deliver_policy: DeliverPolicy.All });
        const m = await c.next({ expires: 2_000 });
        return m ? decode(m.data, DeadLetterSchema, 'dead letter') : undefined;
      },
      { timeoutMs: 20_000, what: 'the poison message to be dead-lettered' },
    );
    expect(dl.ok).toBe(true);
    if (!dl.ok) return;
    expect(dl.value.source).toBe('command');
    expect(dl.value.reason).toMatch(/redelivered 3 times without success \(limit 3\)/);
    expect(new TextDecoder().decode(dl.value.original)).toBe('poison');
    // It left the work queue: nothing is pending on the consumer any more.
    const ci = await b.jsm.consumers.info(b.names.streams.commands, 'c');
    expect(ci.num_pending + ci.num_ack_pending).toBe(0);
  });
});
