// `triad dlq`: dead letters listed with their reasons, original subjects and decoded bodies (msgpack
// values, else a byte preview), where a replay would go and who may have written them, filtered by
// source; `triad dlq replay <seq>` shows what it would publish and, confirmed, re-publishes one to its own
// source, so a submission refused for a workflow not yet registered runs once it is (decision 0022).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ordersWorkflow } from '@triad/example-orders';
import { encode } from '@triad/protocol';
import type { StoredDeadLetter } from '@triad/client';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { waitForDeadLetter } from '../support/dead-letters.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let triad: TestTriad;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  triad = await startTriad(td, { nats, redis });
});

async function listed(args: string[] = []): Promise<StoredDeadLetter[]> {
  const r = await cli(triad, ['dlq', '--json', ...args]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as StoredDeadLetter[];
}

describe('triad dlq', () => {
  it('lists dead letters newest first with reason, original subject, and the body decoded or previewed; --source filters', async () => {
    const bus = triad.client.bus;
    const submitSubject = bus.names.subjects.submit(triad.client.clientId);
    const garbage = new Uint8Array([0xc1, 0xde, 0xad, 0xbe, 0xef]);
    await bus.js.publish(submitSubject, garbage, { msgID: 'dlq-garbage' });
    await waitForDeadLetter(bus, (d) => d.source === 'submit' && d.original.length === garbage.length, 'the garbage dead letter');
    await bus.js.publish(submitSubject, encode({ taskId: 'dlq-schema', workflow: 7 }), { msgID: 'dlq-schema' });
    await waitForDeadLetter(bus, (d) => d.source === 'submit' && d.reason.includes('submission is invalid'), 'the schema dead letter');
    await bus.js.publish(bus.names.subjects.step('payment'), new Uint8Array([1, 2, 3]), { msgID: 'dlq-step' });
    await waitForDeadLetter(bus, (d) => d.source === 'step.payment', 'the step request dead letter');

    const all = await listed();
    expect(all.map((d) => d.seq)).toEqual([...all.map((d) => d.seq)].sort((a, b) => b - a));
    const bad = all.find((d) => d.original.format === 'bytes' && d.original.hex === 'c1deadbeef');
    expect(bad, JSON.stringify(all)).toMatchObject({ source: 'submit', subject: submitSubject, original: { bytes: 5, base64: Buffer.from(garbage).toString('base64') } });
    expect(bad?.reason).toMatch(/not valid msgpack/);
    const schema = all.find((d) => d.original.format === 'msgpack' && (d.original.value as { taskId?: string }).taskId === 'dlq-schema');
    expect(schema?.original).toMatchObject({ format: 'msgpack', value: { taskId: 'dlq-schema', workflow: 7 } });
    expect(schema?.reason).toMatch(/workflow/);
    expect(schema?.headers?.['Nats-Msg-Id']).toBe('dlq-schema');

    const steps = await listed(['--source', 'step.payment']);
    expect(steps.length).toBeGreaterThan(0);
    for (const d of steps) expect(d).toMatchObject({ source: 'step.payment', subject: bus.names.subjects.step('payment') });
    // A step request's dead letter is the payment agent's word: it may write dlq.step_payment, not step.payment.
    expect(steps[0]?.replay).toMatchObject({ ok: true, subject: bus.names.subjects.step('payment'), stream: bus.names.streams.steps });
    expect(steps[0]?.writer.roles).toContain('agent "payment"');
    expect(steps[0]?.writer.warning).toMatch(/agent "payment" may publish, but that identity may not publish on triad\..*\.step\.payment/);
    expect(schema?.replay).toMatchObject({ ok: true, subject: submitSubject, headers: {} });
    expect(schema?.writer).toEqual({ roles: ['scheduler', 'supervisor'] });
    expect(await listed(['--source', 'command'])).toEqual([]);

    // The table form shows the reason and the preview.
    const text = await cli(triad, ['dlq', '--limit', '10']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/SEQ\s+RECEIVED\s+SOURCE/);
    expect(text.stdout).toContain('hex c1deadbeef');
    expect(text.stdout).toContain('"taskId":"dlq-schema"');
  });

  it('replay re-publishes a refused submission to its subject: once its workflow exists, the task runs', async () => {
    const bus = triad.client.bus;
    const { taskId } = await triad.client.submit('orders-later', { orderId: 'dlq-replay', amount: 3 }, { taskId: 'dlq-replay-1' });
    const dl = await waitForDeadLetter(bus, (d) => d.source === 'submit' && d.reason.includes('orders-later'), 'the unknown-workflow dead letter');
    expect(dl.subject).toBe(bus.names.subjects.submit(triad.client.clientId));
    const seq = (await listed(['--source', 'submit'])).find((d) => d.original.format === 'msgpack' && (d.original.value as { taskId?: string }).taskId === taskId)?.seq;
    expect(seq).toBeDefined();

    await triad.client.registerWorkflow({ ...ordersWorkflow.toJSON(), name: 'orders-later' });
    // What it would publish, before anything is: the source's subject and stream, the message id, the body.
    const dry = await cli(triad, ['dlq', 'replay', String(seq), '--dry-run']);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(new RegExp(`subject: +${bus.names.subjects.submit(triad.client.clientId).replace(/\./g, '\\.')}\n`));
    expect(dry.stdout).toMatch(new RegExp(`stream: +${bus.names.streams.submit}\n`));
    expect(dry.stdout).toContain(`message id:  triad-dlq-replay:${seq}`);
    expect(dry.stdout).toContain('"orderId":"dlq-replay"');
    expect(dry.stdout).toContain('dry run: nothing was published');
    // Not a terminal to ask on, and no --yes: nothing is published either.
    const unconfirmed = await cli(triad, ['dlq', 'replay', String(seq)]);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain('not published: confirm with --yes');
    await expect(triad.client.getTask(taskId)).rejects.toMatchObject({ code: 'UNKNOWN_TASK' });

    const r = await cli(triad, ['dlq', 'replay', String(seq), '--yes', '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { preview: StoredDeadLetter; replayed: unknown };
    expect(out.preview.replay).toMatchObject({ ok: true, subject: bus.names.subjects.submit(triad.client.clientId) });
    expect(out.replayed).toMatchObject({ seq, subject: bus.names.subjects.submit(triad.client.clientId), stream: bus.names.streams.submit, duplicate: false });
    const done = await waitFor(async () => (await triad.client.getTask(taskId).catch(() => undefined))?.status === 'completed' || undefined, {
      timeoutMs: 30_000,
      what: `replayed task ${taskId} completed`,
    });
    expect(done).toBe(true);

    // A repeat inside the duplicate window is not stored again.
    const again = await cli(triad, ['dlq', 'replay', String(seq), '--yes']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('JetStream did not store it again');
  });

  it('replay of a sequence that holds no dead letter fails with the reason', async () => {
    const r = await cli(triad, ['dlq', 'replay', '999999']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no dead letter at sequence 999999');
    const usage = await cli(triad, ['dlq', 'replay', 'x']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('Expected a whole number');
  });
});
