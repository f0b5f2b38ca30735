// Large payloads (issue #25 item 4, decision 0021 §4): a 20 MB input reaches its agent and its service, a
// 20 MB output reaches the client, and nothing above the inline threshold travels as one message; the
// scheduler refuses references that are not the task's own; retention deletes a task's objects with it.
import { randomBytes, createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { PayloadStore, publishDurable } from '@triad/bus';
import {
  DEFAULT_INLINE_MAX_BYTES,
  TriadError,
  encode,
  isTriadValue,
  objectBucket,
  objectRef,
  type ObjectRef,
  type TaskEvent,
  type TaskState,
} from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { startTriad, type TestTriad } from '../support/triad.js';
import { keys } from '@triad/store';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let triad: TestTriad;
/** A plain NATS connection that sees every message on the namespace's subjects and on every inbox. */
let spy: NatsConnection;
let largest = { bytes: 0, subject: '' };

const MB20 = 20_000_000;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  // No supervisor yet: the retention test starts one with TRIAD_RETENTION_MS=0 once the others are done.
  triad = await startTriad(td, { nats, redis }, { supervisor: false });
  spy = await connect({ servers: nats.url });
  td.add(() => spy.close());
  for (const subject of [`triad.${triad.namespace}.>`, '_INBOX.>']) {
    spy.subscribe(subject, {
      callback: (_e, m) => {
        if (m.data.length > largest.bytes) largest = { bytes: m.data.length, subject: m.subject };
      },
    });
  }
  await spy.flush();
}, 120_000);

function step(state: TaskState, name: string): TaskState['steps'][number] {
  const s = state.steps.find((x) => x.name === name);
  if (!s) throw new Error(`no step ${name} in task ${state.taskId}`);
  return s;
}

describe('large payloads through the example', () => {
  let taskId = '';
  let document = '';

  it('a 20 MB input reaches the inventory service and a 20 MB label comes back to the client; no message is above the threshold', async () => {
    document = randomBytes(15_000_000).toString('base64'); // 20,000,000 characters
    expect(document.length).toBe(MB20);
    const events: TaskEvent[] = [];
    const state = await triad.client.run('orders', { orderId: 'big-1', amount: 42, document, labelBytes: MB20 }, { taskId: 'big-1', timeoutMs: 180_000, onEvent: (e) => events.push(e) });
    taskId = state.taskId;
    expect(state.status, JSON.stringify(state.steps.map((s) => [s.name, s.status, s.error]))).toBe('completed');
    // run() resolved the references: the client holds the whole input and the whole label.
    expect((state.input as { document: string }).document).toBe(document);
    // ship fans out over the reserved lines (one here): its output is the elements' outputs, in order.
    const label = (step(state, 'ship').output as { label: string }[])[0]!.label;
    expect(label.length).toBe(MB20);
    expect(label).toBe('L'.repeat(MB20));
    // The inventory service received the document whole: its ledger holds its size and SHA-256.
    const reserve = triad.services.inventory.effects().find((e) => e.idempotencyKey === `${triad.namespace}/${taskId}/reserve`);
    expect(reserve?.document).toEqual({ bytes: MB20, sha256: createHash('sha256').update(document).digest('hex') });
    // Every message on the namespace's subjects and on every inbox stayed under the threshold (+ 16 KiB of envelope).
    expect(largest.bytes, `largest message ${largest.subject}`).toBeLessThanOrEqual(DEFAULT_INLINE_MAX_BYTES + 16 * 1024);
    expect(largest.bytes).toBeGreaterThan(100_000); // the spy did see the payload's chunks go by
  }, 240_000);

  it('the stored state holds references, which the client downloads; the task owns both objects', async () => {
    const state = await triad.client.getTask(taskId);
    expect(isTriadValue(state.input)).toBe(true);
    const inRef = state.input as ObjectRef;
    expect(inRef).toMatchObject({ $triad: 'object', v: 1, bucket: objectBucket(triad.namespace, triad.client.clientId) });
    expect(inRef.name.startsWith(`${taskId}/in/`)).toBe(true);
    // A fan-out element's output, stored as an object under the element's name (decision 0021 §4.3).
    const outRef = (step(state, 'ship').output as ObjectRef[])[0]!;
    expect(isTriadValue(outRef)).toBe(true);
    expect(outRef.name.startsWith(`${taskId}/ship#0/run/1/`)).toBe(true);
    expect(((await triad.client.download(outRef)) as { label: string }).label.length).toBe(MB20);
    // The stored input bytes are the reference only.
    const raw = await triad.redis.hgetBuffer(keys(triad.namespace).task(taskId), 'input');
    expect(raw?.length ?? 0).toBeLessThan(1_000);
    const objs = await ownedObjects(taskId);
    expect(objs.sort()).toEqual([inRef.name, outRef.name].sort());
  });

  it('a writer refuses user data holding the reserved key, and the scheduler refuses a reference that is not the task\'s own', async () => {
    await expect(triad.client.submit('orders', { orderId: 'x', amount: 1, meta: { $triad: 'mine' } })).rejects.toThrow(/input\.meta has the reserved key "\$triad"/);
    // Published by hand: another client's bucket, and this client's bucket under another task's name.
    const sha = '0'.repeat(64);
    const cases: [string, ObjectRef][] = [
      ['forged-1', objectRef(objectBucket(triad.namespace, 'someoneElse'), 'forged-1/in/abc', 10, sha)],
      ['forged-2', objectRef(objectBucket(triad.namespace, triad.client.clientId), `${taskId}/in/abc`, 10, sha)],
    ];
    for (const [id, ref] of cases) {
      const seen = watchFor(id);
      await publishDurable(triad.client.bus, triad.client.bus.names.subjects.submit(triad.client.clientId), encode({ taskId: id, workflow: 'orders', input: ref, submittedAt: Date.now() }));
      const rejected = await seen;
      expect(rejected.reason ?? rejected.error?.message).toMatch(/the input reference points to bucket .* not this client's bucket/);
    }
  });

  it('retention deletes the objects with their task; the object GC deletes an upload no task refers to', async () => {
    const store = new PayloadStore(triad.client.bus);
    const state = await triad.client.getTask(taskId);
    const refs = [state.input as ObjectRef, (step(state, 'ship').output as ObjectRef[])[0]!];
    for (const r of refs) expect((await store.read(r)).length).toBe(r.size);
    // An input uploaded whose submission never came (the client died between the two).
    const orphan = await triad.client.uploadInput('never-submitted', encode({ blob: 'o'.repeat(300_000) }, 1_000_000));
    expect((await store.read(orphan)).length).toBe(orphan.size);
    const supervisor = await triad.startSupervisor({ retentionMs: 0, objectGcGraceMs: 0 });
    await waitFor(async () => (await triad.client.getTask(taskId).then(() => false, () => true)), { timeoutMs: 30_000, what: 'the task purged' }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${supervisor.output().slice(-4000)}`);
    });
    for (const r of [...refs, orphan]) {
      await waitFor(async () => store.read(r).then(() => false, (e: unknown) => e instanceof TriadError && /not in bucket/.test(e.message)), { timeoutMs: 30_000, what: `object ${r.name} deleted` });
    }
  }, 90_000);
});

/** The first task event of `taskId` that is a rejection, from the task's history as a client reads it. */
async function watchFor(taskId: string): Promise<TaskEvent> {
  for await (const e of triad.client.watch(taskId, { signal: AbortSignal.timeout(30_000) })) {
    if (e.type === 'rejected') return e;
  }
  throw new Error(`no rejection of ${taskId} seen`);
}

/** The object names the task's record lists as its own (`objs`). */
async function ownedObjects(id: string): Promise<string[]> {
  const raw = await triad.redis.hget(keys(triad.namespace).task(id), 'objs');
  return raw ? (JSON.parse(raw) as string[]) : [];
}
