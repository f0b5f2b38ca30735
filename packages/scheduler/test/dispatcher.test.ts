// The scheduler's own pure logic: the step requests a transition dispatches, encoded with the stored
// payload bytes embedded as they are (never decoded), read back by an agent as valid StepRequests.
import { describe, expect, it } from 'vitest';
import { StepRequestSchema, decode, encode, type RegisteredWorkflow } from '@triad/protocol';
import { idempotencyKey, validateDefinition } from '@triad/core';
import type { Transition } from '@triad/store';
import { stepMessageId, stepRequestMessages } from '../src/index.js';

const wf: RegisteredWorkflow = {
  ...validateDefinition({
    name: 'orders',
    defaults: { retry: { maxAttempts: 2 } },
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory', retry: { maxAttempts: 5 } } },
      { name: 'charge', agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'], retry: { maxAttempts: 4 } },
    ],
  }),
  version: 3,
  registeredAt: 1,
};

const NOW = 1_700_000_000_000;

function transition(over: Partial<Transition>): Transition {
  return { workflow: 'orders', version: 3, client: 'c1', lockEpoch: 1, status: 'running', events: [], dispatch: [], outputs: new Map(), ...over };
}

function read(bytes: Uint8Array) {
  const d = decode(bytes, StepRequestSchema, 'step request');
  if (!d.ok) throw d.error;
  return d.value;
}

describe('stepRequestMessages', () => {
  it('sends a run with the task input and the outputs it needs, as the store holds them, and the step retry policy', () => {
    const input = encode({ orderId: 'o-1', amount: 12_345_678_901 });
    const reserved = encode({ reservationId: 'r-7' });
    const t = transition({
      input,
      outputs: new Map([['reserve', reserved]]),
      dispatch: [{ step: 'charge', agent: 'payment', kind: 'run', attempt: 2, completeBy: NOW + 30_000, needs: ['reserve'] }],
    });
    const [m, ...rest] = stepRequestMessages('shop', 't-1', wf, t, NOW);
    expect(rest).toEqual([]);
    expect(m).toMatchObject({ agent: 'payment', step: 'charge', kind: 'run', attempt: 2, messageId: stepMessageId('t-1', 'charge', 'run', 2) });
    const req = read(m!.bytes);
    expect(req).toEqual({
      taskId: 't-1',
      workflow: 'orders',
      version: 3,
      step: 'charge',
      agent: 'payment',
      kind: 'run',
      attempt: 2,
      idempotencyKey: expect.any(String),
      completeBy: NOW + 30_000,
      input: { orderId: 'o-1', amount: 12_345_678_901 },
      needs: { reserve: { reservationId: 'r-7' } },
      dispatchedAt: NOW,
      retry: wf.steps[1]!.retry,
      // Where a large output goes: the task's client's object store bucket (decision 0021 §4.3).
      bucket: 'triad_4_shop_c1',
    });
    // The payload bytes themselves are in the message, untouched.
    expect(Buffer.from(m!.bytes).includes(Buffer.from(input))).toBe(true);
  });

  it('sends a compensation with the run it undoes and what is known of its effect; absent payloads stay absent', () => {
    const t = transition({
      input: encode(undefined),
      outputs: new Map([['reserve', encode(undefined)]]),
      dispatch: [
        { step: 'reserve', agent: 'inventory', kind: 'compensate', attempt: 1, completeBy: NOW + 1_000, needs: ['reserve'], effect: 'applied' },
        { step: 'reserve', agent: 'inventory', kind: 'compensate', attempt: 2, completeBy: NOW + 2_000, needs: [] },
      ],
    });
    const [applied, unknown] = stepRequestMessages('shop', 't-2', wf, t, NOW).map((m) => read(m.bytes));
    expect(applied).not.toHaveProperty('input');
    expect(applied?.needs).toEqual({});
    expect(applied).toMatchObject({ kind: 'compensate', effect: 'applied', retry: wf.steps[0]!.compensate!.retry });
    expect(applied?.undoes).toBe(idempotencyKey('shop', 't-2', 'reserve', 'run'));
    expect(applied?.idempotencyKey).toBe(idempotencyKey('shop', 't-2', 'reserve', 'compensate'));
    expect(unknown).toMatchObject({ attempt: 2, effect: 'unknown' });
  });

  it('falls back to the workflow default retry, and sends nothing for a transition that dispatches nothing', () => {
    const plain = { ...wf, steps: wf.steps.map((s) => ({ ...s, retry: undefined })) } as RegisteredWorkflow;
    const t = transition({ dispatch: [{ step: 'charge', agent: 'payment', kind: 'run', attempt: 1, completeBy: NOW, needs: [] }] });
    expect(read(stepRequestMessages('shop', 't-3', plain, t, NOW)[0]!.bytes).retry).toEqual(wf.defaults.retry);
    expect(stepRequestMessages('shop', 't-3', wf, transition({}), NOW)).toEqual([]);
  });

  it('sends a fan-out element with its index, the count and its value as the list held it; its own keys and message id; its compensation gets its own output under the step name', () => {
    const value = encode({ sku: 'b', qty: 2 });
    const t = transition({
      input: encode({ items: [] }),
      outputs: new Map([
        ['=charge#1', value],
        ['charge#0', encode('parcel-0')],
        ['=charge#0', encode(null)],
      ]),
      dispatch: [
        { step: 'charge', agent: 'payment', kind: 'run', attempt: 2, completeBy: NOW, needs: [], item: 1, count: 3 },
        { step: 'charge', agent: 'payment', kind: 'compensate', attempt: 1, completeBy: NOW, needs: ['charge#0'], effect: 'applied', item: 0, count: 3 },
      ],
    });
    const [run, comp] = stepRequestMessages('shop', 't-5', wf, t, NOW);
    expect(run?.messageId).toBe('t-5:charge#1:run:2');
    expect(run?.messageId).toBe(stepMessageId('t-5', 'charge', 'run', 2, 1));
    expect(comp?.messageId).toBe('t-5:charge#0:compensate:1');
    const r = read(run!.bytes);
    expect(r.item).toEqual({ index: 1, count: 3, value: { sku: 'b', qty: 2 } });
    expect(r.idempotencyKey).toBe('shop/t-5/charge/1');
    expect(Buffer.from(run!.bytes).includes(Buffer.from(value))).toBe(true);
    const c = read(comp!.bytes);
    expect(c).toMatchObject({ idempotencyKey: 'shop/t-5/charge/0/compensate', undoes: 'shop/t-5/charge/0', effect: 'applied', needs: { charge: 'parcel-0' } });
    expect(c.item).toEqual({ index: 0, count: 3 }); // a nil element arrives as absent (optional fields read nil as absent)
  });

  it('refuses a request over the message limit rather than sending what NATS would refuse', () => {
    const big = encode('x'.repeat(600_000));
    const t = transition({ input: big, outputs: new Map([['reserve', big]]), dispatch: [{ step: 'charge', agent: 'payment', kind: 'run', attempt: 1, completeBy: NOW, needs: ['reserve'] }] });
    expect(() => stepRequestMessages('shop', 't-4', wf, t, NOW)).toThrow(/over the limit/);
  });
});
