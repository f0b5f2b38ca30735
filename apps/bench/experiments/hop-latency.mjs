// An experiment, not part of `npm run bench`: the latency of one hop, publish → a subscriber in another
// connection has the message, one message at a time — through a JetStream work-queue stream (file and
// memory storage; a pull consumer with an outstanding consume(), as Triad's, and a push consumer) and
// through core NATS. The floor under each of a step leg's hops (docs/performance.md, decision 0018).
//
//   node apps/bench/experiments/hop-latency.mjs [--messages 3000]
//
// It starts its own nats-server on a free port, in a temp dir, through @triad/launcher (run `npm run
// build` first): the binary found or its install hint given, nothing left running however it ends.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AckPolicy, DeliverPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, requireBinary, startProcess, waitListening } from '@triad/launcher';

const { values } = parseArgs({ options: { messages: { type: 'string', default: '3000' } } });
const N = Number(values.messages);
const WARMUP = 100;
const PAYLOAD = new Uint8Array(200);

const summary = (samples) => {
  const s = samples.slice(WARMUP).sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(s.length * q))].toFixed(3);
  return `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`;
};
/** Sends N messages one at a time with `publish`, each after the previous one arrived (`arrived` is called by the receiver). */
async function oneAtATime(publish, setArrived) {
  const samples = [];
  for (let i = 0; i < N + WARMUP; i++) {
    const got = new Promise((r) => setArrived(r));
    const t0 = performance.now();
    publish();
    await got;
    samples.push(performance.now() - t0);
  }
  return summary(samples);
}

const port = await freePort();
const dir = mkdtempSync(join(tmpdir(), 'hop-latency-'));
const server = await startProcess({ name: 'nats-server', command: requireBinary('nats-server', { by: 'by this experiment' }), args: ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir] });
try {
  await waitListening({ host: '127.0.0.1', port, name: 'nats-server', exited: () => (server.isRunning() ? undefined : 'exited'), detail: () => `; last output:\n${server.tail()}` });
  const pub = await connect({ servers: `127.0.0.1:${port}` });
  const sub = await connect({ servers: `127.0.0.1:${port}` });
  const jsm = await jetstreamManager(pub);
  const js = jetstream(pub);
  const sjs = jetstream(sub);
  let arrived = () => undefined;
  const setArrived = (r) => (arrived = r);
  for (const storage of [StorageType.File, StorageType.Memory]) {
    const stream = `HOP_${storage}`;
    await jsm.streams.add({ name: stream, subjects: [`${storage}.>`], retention: RetentionPolicy.Workqueue, storage });
    await jsm.consumers.add(stream, { durable_name: 'pull', filter_subject: `${storage}.pull`, ack_policy: AckPolicy.Explicit });
    await jsm.consumers.add(stream, { durable_name: 'push', filter_subject: `${storage}.push`, ack_policy: AckPolicy.Explicit, deliver_subject: `deliver.${storage}`, deliver_policy: DeliverPolicy.All });

    const pulled = await (await sjs.consumers.get(stream, 'pull')).consume({ max_messages: 64, expires: 2_000 });
    void (async () => {
      for await (const m of pulled) {
        m.ack();
        arrived();
      }
    })();
    console.log(`JetStream, ${storage} storage, pull consume(): ${await oneAtATime(() => void js.publish(`${storage}.pull`, PAYLOAD), setArrived)}`);
    await pulled.close();

    const pushed = sub.subscribe(`deliver.${storage}`);
    void (async () => {
      for await (const m of pushed) {
        m.respond(new TextEncoder().encode('+ACK'));
        arrived();
      }
    })();
    console.log(`JetStream, ${storage} storage, push consumer: ${await oneAtATime(() => void js.publish(`${storage}.push`, PAYLOAD), setArrived)}`);
    pushed.unsubscribe();
  }
  const core = sub.subscribe('core.hop');
  void (async () => {
    for await (const _ of core) arrived();
  })();
  await sub.flush();
  console.log(`core NATS publish → subscriber: ${await oneAtATime(() => pub.publish('core.hop', PAYLOAD), setArrived)}`);
  await pub.close();
  await sub.close();
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
