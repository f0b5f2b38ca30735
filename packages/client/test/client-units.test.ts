// The client's own pure logic: where a dead letter may be replayed (and where it may not), what its
// original bytes say, and the subject token of a source.
import { describe, expect, it } from 'vitest';
import { encode, names, type DeadLetter } from '@triad/protocol';
import { decodeOriginal, deadLetterWriter, replayPlan, sourceToken } from '../src/index.js';

const n = names('shop');
const letter = (over: Partial<DeadLetter>): DeadLetter => ({ source: 'submit', reason: 'invalid', receivedAt: 1, deliveries: 1, original: new Uint8Array([1]), ...over });

describe('replayPlan', () => {
  it('a submission goes back to the subject it came on, with the protocol and trace headers only, under a replay message id', () => {
    const plan = replayPlan(n, 42, 'triad.shop.dlq.submit', letter({ subject: 'triad.shop.submit.web', headers: { 'Triad-Protocol': '1', traceparent: 't', 'Nats-Msg-Id': 'old', 'Nats-Expected-Stream': 'X' } }));
    expect(plan).toEqual({ ok: true, subject: 'triad.shop.submit.web', stream: n.streams.submit, headers: { 'Triad-Protocol': '1', traceparent: 't' }, msgId: 'triad-dlq-replay:42' });
  });

  it('a step request goes back to its agent type, a result to its subject, a command to the commands subject', () => {
    expect(replayPlan(n, 1, 'triad.shop.dlq.step_payment', letter({ source: 'step.payment' }))).toMatchObject({ ok: true, subject: n.subjects.step('payment'), stream: n.streams.steps });
    expect(replayPlan(n, 1, 'triad.shop.dlq.result', letter({ source: 'result', subject: n.subjects.result('payment') }))).toMatchObject({ ok: true, stream: n.streams.results });
    expect(replayPlan(n, 1, 'triad.shop.dlq.command', letter({ source: 'command' }))).toMatchObject({ ok: true, subject: n.subjects.command });
    // Step request batches (decision 0023): a whole batch back to its batch subject, an item alone to the agent's.
    expect(replayPlan(n, 1, 'triad.shop.dlq.step_payment', letter({ source: 'step.payment', subject: n.subjects.stepBatch('payment') }))).toMatchObject({ ok: true, subject: 'triad.shop.step.b~payment', stream: n.streams.steps });
    expect(replayPlan(n, 1, 'triad.shop.dlq.step_payment', letter({ source: 'step.payment', subject: n.subjects.step('payment') }))).toMatchObject({ ok: true, subject: n.subjects.step('payment') });
    expect(replayPlan(n, 1, 'triad.shop.dlq.step_payment', letter({ source: 'step.payment', subject: n.subjects.stepBatch('shipping') }))).toMatchObject({ ok: false, reason: expect.stringContaining('forged or corrupt') });
  });

  it('refuses what could be forged or cannot go anywhere, saying why', () => {
    expect(replayPlan(n, 1, 'triad.shop.dlq.submit', undefined)).toEqual({ ok: false, reason: 'it is not a dead letter' });
    expect(replayPlan(n, 1, 'triad.other.dlq.submit', letter({}))).toMatchObject({ ok: false, reason: expect.stringContaining('no dead-letter subject of namespace "shop"') });
    expect(replayPlan(n, 1, 'triad.shop.dlq.result', letter({ source: 'submit' }))).toMatchObject({ ok: false, reason: expect.stringContaining('forged or corrupt') });
    expect(replayPlan(n, 1, 'triad.shop.dlq.submit', letter({ subject: n.subjects.command }))).toMatchObject({ ok: false, reason: expect.stringContaining('not a submission subject') });
    expect(replayPlan(n, 1, 'triad.shop.dlq.submit', letter({}))).toMatchObject({ ok: false, reason: expect.stringContaining('records no subject') });
    expect(replayPlan(n, 1, 'triad.shop.dlq.api', letter({ source: 'api' }))).toMatchObject({ ok: false, reason: expect.stringContaining('never replayed') });
    expect(replayPlan(n, 1, 'triad.shop.dlq.command', letter({ source: 'command', subject: 'triad.shop.step.x' }))).toMatchObject({ ok: false, reason: expect.stringContaining('not its source') });
  });

  it('names who may have written a letter, and warns when that writer may not publish where it replays', () => {
    const plan = replayPlan(n, 1, 'triad.shop.dlq.step_payment', letter({ source: 'step.payment' }));
    const w = deadLetterWriter(n, 'triad.shop.dlq.step_payment', plan);
    expect(w.roles.length).toBeGreaterThan(0);
    expect(deadLetterWriter(n, 'triad.shop.dlq.api', { ok: false, reason: 'x' }).warning).toBeUndefined();
  });
});

describe('decodeOriginal and sourceToken', () => {
  it('a msgpack original comes back as a JSON-safe value; other bytes as a preview with the reason', () => {
    expect(decodeOriginal(encode({ a: 1, b: new Uint8Array([1, 2]) }))).toMatchObject({ format: 'msgpack', value: { a: 1, b: { base64: 'AQI=' } } });
    const bad = decodeOriginal(new Uint8Array([0xc1, 0x00]));
    expect(bad).toMatchObject({ format: 'bytes', bytes: 2, hex: 'c100', truncated: false });
  });

  it('a source becomes one subject token', () => {
    expect(sourceToken('step.payment')).toBe('step_payment');
    expect(sourceToken('a b*c>')).toBe('a_b_c_');
  });
});
