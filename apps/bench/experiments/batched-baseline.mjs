// An experiment, not part of `npm run bench`: the bench's JetStream baseline (apps/bench/src/baseline.ts —
// chains of hops through a work-queue stream, a second process answering each through another) run three
// ways, to measure what batching the messages of one event-loop turn would save (decision 0018, option B):
//   single           one message per request and per reply (the bench's baseline)
//   replies-batched  replies up to --max per message: Triad's pattern today (results batched, decision 0008)
//   batched          requests too (step requests batched per agent type: option B)
// CPU per round trip counts nats-server, the answering process and this one.
//
//   node apps/bench/experiments/batched-baseline.mjs [--chains 3000] [--max 23] [--runs 3]
//
// It starts its own nats-server on a free port, in a temp dir, through @triad/launcher (run `npm run
// build` first): the binary found or its install hint given, nothing left running however it ends.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { freePort, requireBinary, startProcess, waitListening } from '@triad/launcher';
// The bench's own consumer loop and CPU accounting (built by `npm run build`).
import { cpuPerUnit, cpuWindow } from '../dist/cpu.js';
import { pump } from '../dist/pump.js';

const ITEM_BYTES = 256; // as the bench's baseline payload
const HOPS = 3;
const MODES = ['single', 'replies-batched', 'batched'];

const encodeItems = (items) => {
  const b = new Uint8Array(4 + items.length * ITEM_BYTES);
  const v = new DataView(b.buffer);
  v.setUint32(0, items.length);
  items.forEach(([chain, hop], i) => {
    v.setUint32(4 + i * ITEM_BYTES, chain);
    v.setUint32(8 + i * ITEM_BYTES, hop);
  });
  return b;
};
const decodeItems = (d) => {
  const v = new DataView(d.buffer, d.byteOffset, d.byteLength);
  return Array.from({ length: v.getUint32(0) }, (_, i) => [v.getUint32(4 + i * ITEM_BYTES), v.getUint32(8 + i * ITEM_BYTES)]);
};

/** Items queued in one event-loop turn leave as messages of up to `max` items; each resolves once its message is stored. */
function perTurnBatcher(js, subject, max) {
  let queue = [];
  let seq = 0;
  return (item) =>
    new Promise((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (queue.length > 1) return;
      setImmediate(() => {
        const q = queue;
        queue = [];
        for (let i = 0; i < q.length; i += max) {
          const part = q.slice(i, i + max);
          js.publish(subject, encodeItems(part.map((p) => p.item)), { msgID: `${subject}:${process.pid}:${++seq}` }).then(
            () => part.forEach((p) => p.resolve()),
            (e) => part.forEach((p) => p.reject(e)),
          );
        }
      });
    });
}

async function echo(port, mode, max) {
  const nc = await connect({ servers: `127.0.0.1:${port}` });
  const js = jetstream(nc);
  const reply = perTurnBatcher(js, 'rep', max);
  await pump(
    await js.consumers.get('REQ', 'echo'),
    32,
    async (m) => {
      if (mode === 'single') await js.publish('rep', m.data, { msgID: `rep:${m.seq}` });
      else await Promise.all(decodeItems(m.data).map((item) => reply(item)));
      m.ack();
    },
    (e) => console.error(e),
  );
  process.stdout.write('ready\n');
}

async function measure(mode, chains, max) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'batched-baseline-'));
  const server = await startProcess({ name: 'nats-server', command: requireBinary('nats-server', { by: 'by this experiment' }), args: ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir] });
  let answerer;
  try {
    await waitListening({ host: '127.0.0.1', port, name: 'nats-server', exited: () => (server.isRunning() ? undefined : 'exited'), detail: () => `; last output:\n${server.tail()}` });
    const nc = await connect({ servers: `127.0.0.1:${port}` });
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    for (const [name, subject] of [['REQ', 'req'], ['REP', 'rep']]) {
      await jsm.streams.add({ name, subjects: [subject], retention: RetentionPolicy.Workqueue, storage: StorageType.File, num_replicas: 1, duplicate_window: nanos(120_000), discard: DiscardPolicy.Old });
    }
    for (const [stream, durable, filter] of [['REQ', 'echo', 'req'], ['REP', 'driver', 'rep']]) {
      await jsm.consumers.add(stream, { durable_name: durable, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, filter_subject: filter, ack_wait: nanos(30_000), max_deliver: -1, max_ack_pending: 10_000 });
    }
    answerer = await startProcess({ name: 'answerer', args: [process.argv[1], '--echo', String(port), '--mode', mode, '--max', String(max)] });
    await answerer.waitForOutput(/^ready$/);

    let round = 0;
    let finished = 0;
    let expected = 0;
    let allDone = () => undefined;
    const request = perTurnBatcher(js, 'req', max);
    const send = (chain, hop) => (mode === 'batched' ? request([chain, hop]) : js.publish('req', encodeItems([[chain, hop]]), { msgID: `req:${round}:${chain}:${hop}` }));
    const driver = await pump(
      await js.consumers.get('REP', 'driver'),
      64,
      async (m) => {
        const items = decodeItems(m.data);
        // As the scheduler: the next hops are stored before the reply that caused them is acknowledged.
        await Promise.all(items.map(([chain, hop]) => (hop < HOPS ? send(chain, hop + 1) : undefined)));
        m.ack();
        for (const [, hop] of items) if (hop >= HOPS && ++finished === expected) allDone();
      },
      (e) => console.error(e),
    );
    const burst = async (n) => {
      round++;
      finished = 0;
      expected = n;
      const done = new Promise((r) => (allDone = r));
      const t0 = performance.now();
      await Promise.all(Array.from({ length: n }, (_, c) => send(c, 1)));
      await done;
      return performance.now() - t0;
    };
    await burst(300); // warm-up
    const cpu = cpuWindow([
      { name: 'nats-server', pid: server.pid },
      { name: 'answerer', pid: answerer.pid },
    ]);
    const ms = await burst(chains);
    const shares = cpu.end(ms);
    const trips = chains * HOPS;
    await driver.stop();
    await nc.close();
    // cpuWindow names this process "bench client": here it is the driver.
    const parts = Object.fromEntries(shares.map((c) => [c.name === 'bench client' ? 'driver' : c.name, +(c.cpuMs / trips).toFixed(4)]));
    return { mode, max, roundTripsPerSec: Math.round(trips / (ms / 1000)), cpuMsPerRoundTrip: +cpuPerUnit(shares, trips).toFixed(4), ...parts };
  } finally {
    await answerer?.kill();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const { values } = parseArgs({ options: { echo: { type: 'string' }, mode: { type: 'string', default: 'single' }, max: { type: 'string', default: '23' }, chains: { type: 'string', default: '3000' }, runs: { type: 'string', default: '3' } } });
const max = Number(values.max);
if (values.echo) await echo(Number(values.echo), values.mode, max);
else {
  for (let run = 1; run <= Number(values.runs); run++) for (const mode of MODES) console.log(JSON.stringify({ run, ...(await measure(mode, Number(values.chains), max)) }));
  process.exit(0);
}
