// The kit's judges fail an agent that breaks the protocol: each case passes what a conforming agent does
// and fails a made-up observation of an agent that gets that case wrong, naming what was wrong.
import { describe, expect, it } from 'vitest';
import { encode, type StepResult } from '@triad/protocol';
import { buildCases, type CaseObservation, type CaseSpec, type KitContext, type ObservedRequest, type ObservedResult } from './cases.js';
import { floatPaths } from './encoding.js';
import type { ObservedCall } from './service.js';

const ctx: KitContext = { namespace: 'ns', agent: 'fraud', t0: 1_000_000, resultSubject: 'triad.ns.result.fraud', deadLetterSubject: 'triad.ns.dlq.step_fraud' };
const cases = buildCases(ctx);
const spec = (name: string): CaseSpec => {
  const c = cases.find((x) => x.name === name);
  if (!c) throw new Error(`no case ${name}`);
  return c;
};
const field = (c: CaseSpec, i: number, key: string): unknown => (c.requests[i]!.value as Record<string, unknown>)[key];

function requests(c: CaseSpec): ObservedRequest[] {
  return c.requests.map((r) => ({ msgId: r.msgId, value: r.value, bytes: encode(r.value), publishedAt: ctx.t0, ackedAt: ctx.t0 + 50 }));
}

function call(c: CaseSpec, o: Partial<ObservedCall> = {}): ObservedCall {
  const kind = field(c, 0, 'kind');
  const undoes = field(c, 0, 'undoes');
  return {
    path: kind === 'compensate' ? '/undo' : '/apply',
    idempotencyKey: field(c, 0, 'idempotencyKey') as string,
    ...(typeof undoes === 'string' ? { of: undoes } : {}),
    body: {},
    startedAt: ctx.t0 + 10,
    endedAt: ctx.t0 + 20,
    ended: 'answered',
    status: 200,
    ...o,
  };
}

function result(c: CaseSpec, o: { attempt?: number; tries?: number; error?: Extract<StepResult, { ok: false }>['error'] } = {}): ObservedResult {
  const base = { taskId: c.taskId, step: 's', kind: field(c, 0, 'kind') as 'run' | 'compensate', attempt: o.attempt ?? 1, agentId: 'a1', finishedAt: ctx.t0 + 30, tries: o.tries ?? 1 };
  const value: StepResult = o.error ? { ...base, ok: false, error: o.error } : { ...base, ok: true, output: { ref: 'x' } };
  return { subject: ctx.resultSubject, msgId: `${c.taskId}:s:${base.kind}:${base.attempt}:result`, batched: false, taskId: c.taskId, protocolHeader: '1', receivedAt: ctx.t0 + 40, value, problems: [] };
}

/** A conforming result for element `i` of the fan-out case: its index echoed, `#<i>` in its message id. */
function element(c: CaseSpec, i: number): ObservedResult {
  const r = result(c);
  return { ...r, msgId: `${c.taskId}:s#${i}:run:1:result`, value: { ...r.value!, item: i } };
}

/** What a conforming agent does in each case. */
function conforming(name: string): CaseObservation {
  const c = spec(name);
  const o: CaseObservation = { ctx, requests: requests(c), calls: [], results: [], deadLetters: [], judgedAt: ctx.t0 + 20_000 };
  switch (name) {
    case 'consumer':
      o.consumer = { durable: 'agent-fraud', filterSubject: 'triad.ns.step.fraud', ackPolicy: 'explicit', ackWaitMs: 5_000, deliverPolicy: 'all' };
      break;
    case 'probe':
      o.calls = [call(c)];
      o.results = [result(c)];
      o.probes = { sent: true, held: [{ value: { taskId: c.taskId, step: 's', kind: 'run', attempt: 1, agentId: 'a1', since: ctx.t0 + 10, try: 1, state: 'calling' }, problems: [] }], other: [] };
      break;
    case 'ok':
    case 'keep-alive':
    case 'compensation-applied':
    case 'compensation-unknown':
      o.calls = [call(c)];
      o.results = [result(c)];
      break;
    case 'retryable-then-ok':
      o.calls = [call(c, { status: 503 }), call(c, { status: 503 }), call(c)];
      o.results = [result(c, { tries: 3 })];
      break;
    case 'retryable-failure':
      o.calls = [call(c, { status: 503 }), call(c, { status: 503 }), call(c, { status: 503 })];
      o.results = [result(c, { tries: 3, error: { message: 'unavailable', retryable: true, effect: 'none' } })];
      break;
    case 'throttled':
      o.calls = [call(c, { status: 429 })];
      o.results = [result(c, { error: { message: 'slow down', retryable: true, throttled: true, retryAfterMs: 2_000, effect: 'none' } })];
      break;
    case 'permanent-failure':
      o.calls = [call(c, { status: 422 })];
      o.results = [result(c, { error: { message: 'refused', retryable: false, effect: 'none' } })];
      break;
    case 'complete-by-reached':
      o.calls = [call(c, { ended: 'aborted', endedAt: field(c, 0, 'completeBy') as number })];
      break;
    case 'duplicate-delivery':
      o.calls = [call(c), call(c)];
      o.results = [result(c)];
      break;
    case 'stale-attempt':
      o.calls = [call(c), call(c)];
      o.results = [result(c, { attempt: 2 }), result(c, { attempt: 1 })];
      break;
    case 'input-reference':
      o.calls = [call(c, { body: { payload: { orderId: c.taskId, amount: 10 } } })];
      o.results = [result(c)];
      break;
    case 'fan-out':
      o.calls = c.requests.map((_, i) => call(c, { idempotencyKey: field(c, i, 'idempotencyKey') as string }));
      o.results = c.requests.map((_, i) => element(c, i));
      break;
    case 'invalid-request':
    case 'wrong-agent':
      o.deadLetters = [{ subject: ctx.deadLetterSubject, value: { source: 'step.fraud', reason: 'invalid', receivedAt: ctx.t0, deliveries: 1, original: new Uint8Array(o.requests[0]!.bytes) }, problems: [] }];
      break;
  }
  return o;
}

/** One way to get each case wrong, and what the judge must say. */
const WRONG: [string, string, (o: CaseObservation) => void, RegExp][] = [
  ['consumer', 'an ack wait of 30 s', (o) => (o.consumer!.ackWaitMs = 30_000), /ack wait is 30000 ms/],
  ['consumer', 'no consumer', (o) => delete o.consumer, /no consumer agent-fraud/],
  ['ok', 'a result with the wrong message id', (o) => (o.results[0]!.msgId = 'conf-ok:s:run:1'), /Nats-Msg-Id/],
  ['ok', 'a result on another subject', (o) => (o.results[0]!.subject = 'triad.ns.result.other'), /not on the agent type's own subject/],
  ['ok', 'a result invalid by the schema', (o) => (o.results[0] = { ...o.results[0]!, problems: ['step result is invalid: tries: required'] }), /tries: required/],
  ['ok', 'no result', (o) => (o.results = []), /no result was sent/],
  ['ok', 'never acknowledged', (o) => delete o.requests[0]!.ackedAt, /never acknowledged/],
  ['ok', 'a key of its own', (o) => (o.calls[0]!.idempotencyKey = 'mine'), /idempotencyKey "mine"/],
  ['retryable-then-ok', 'no retry', (o) => (o.results = [result(spec('retryable-then-ok'), { error: { message: 'x', retryable: true } })]), /is a failure/],
  ['retryable-failure', 'effect left unknown', (o) => (o.results = [result(spec('retryable-failure'), { tries: 3, error: { message: 'x', retryable: true } })]), /not none/],
  ['retryable-failure', 'not retryable', (o) => (o.results = [result(spec('retryable-failure'), { tries: 3, error: { message: 'x', retryable: false, effect: 'none' } })]), /not retryable/],
  ['retryable-failure', 'more tries than maxAttempts', (o) => o.calls.push(call(spec('retryable-failure'), { status: 503 })), /retry.maxAttempts was 3/],
  ['throttled', 'called again inside the window', (o) => o.calls.push(call(spec('throttled'))), /no further call/],
  ['throttled', 'reported as a plain retryable failure', (o) => (o.results = [result(spec('throttled'), { error: { message: 'x', retryable: true, effect: 'none' } })]), /throttled is absent/],
  ['throttled', 'Retry-After read as ms', (o) => (o.results = [result(spec('throttled'), { error: { message: 'x', retryable: true, throttled: true, retryAfterMs: 2, effect: 'none' } })]), /retryAfterMs is 2, not 2000/],
  ['permanent-failure', 'retried', (o) => o.calls.push(call(spec('permanent-failure'), { status: 422 })), /not retried/],
  ['permanent-failure', 'marked retryable', (o) => (o.results = [result(spec('permanent-failure'), { error: { message: 'x', retryable: true, effect: 'none' } })]), /marked retryable/],
  ['complete-by-reached', 'a result at complete-by', (o) => (o.results = [result(spec('complete-by-reached'), { error: { message: 'timeout', retryable: true } })]), /sends nothing back/],
  ['complete-by-reached', 'the call left open', (o) => (o.calls[0] = { ...o.calls[0]!, ended: 'open' }), /not aborted/],
  ['complete-by-reached', 'redelivered and run again', (o) => o.calls.push(call(spec('complete-by-reached'), { startedAt: (field(spec('complete-by-reached'), 0, 'completeBy') as number) + 5_000, ended: 'aborted' })), /started after complete-by/],
  ['late-request', 'run anyway', (o) => o.calls.push(call(spec('late-request'))), /no call/],
  ['duplicate-delivery', 'a new key for the second delivery', (o) => (o.calls[1]!.idempotencyKey = 'again'), /idempotencyKey "again"/],
  ['stale-attempt', 'the newer attempt reported for both', (o) => (o.results = [result(spec('stale-attempt'), { attempt: 2 }), result(spec('stale-attempt'), { attempt: 2 })]), /2 valid results for attempt 2/],
  ['keep-alive', 'redelivered mid-call', (o) => o.calls.push(call(spec('keep-alive'))), /redelivered while the first was still working/],
  ['compensation-applied', 'applied instead of undone', (o) => (o.calls[0]!.path = '/apply'), /not \/undo/],
  ['compensation-unknown', 'undoing another key', (o) => (o.calls[0]!.of = 'other'), /of="other"/],
  ['compensation-unknown', 'reported as a run', (o) => (o.results = [{ ...result(spec('compensation-unknown')), value: { ...result(spec('compensation-unknown')).value!, kind: 'run' } }]), /kind is run/],
  ['fan-out', 'no item echoed', (o) => (o.results = o.results.map((r) => ({ ...r, msgId: `${spec('fan-out').taskId}:s:run:1:result`, value: { ...r.value!, item: undefined } }))), /name no item/],
  ['fan-out', 'the element left out of the message id', (o) => (o.results[1]!.msgId = `${spec('fan-out').taskId}:s:run:1:result`), /Nats-Msg-Id/],
  ['fan-out', 'one key for every element', (o) => (o.calls[1]!.idempotencyKey = o.calls[0]!.idempotencyKey), /element 1 was never called/],
  ['probe', 'an answer for an attempt it does not hold', (o) => o.probes!.other.push({ ...o.probes!.held[0]!, value: { ...o.probes!.held[0]!.value!, attempt: 2 } }), /attempt 2, which no instance holds/],
  ['probe', 'every instance answers', (o) => o.probes!.held.push(o.probes!.held[0]!), /2 instances answered/],
  ['probe', 'the answer names another attempt', (o) => (o.probes!.held[0]!.value!.attempt = 3), /not the probed conf-probe\/s run attempt 1/],
  ['input-reference', 'the reference passed on unresolved', (o) => (o.calls[0]!.body = { payload: { $triad: 'object' } }), /resolve input references/],
  ['input-reference', 'the object not read: a failure', (o) => (o.results = [result(spec('input-reference'), { error: { message: 'input: expected a map', retryable: false, effect: 'none' } })]), /is a failure/],
  ['invalid-request', 'not dead-lettered', (o) => (o.deadLetters = []), /no dead letter/],
  ['wrong-agent', 'run anyway', (o) => (o.deadLetters = [], o.calls = [call(spec('wrong-agent'))]), /no call/],
];

describe('the conformance judges', () => {
  it.each(cases.map((c) => c.name))('%s passes what a conforming agent does', (name) => {
    expect(spec(name).judge(conforming(name)).problems).toEqual([]);
  });

  it.each(WRONG)('%s fails an agent that gets it wrong: %s', (name, _what, spoil, says) => {
    const o = conforming(name);
    spoil(o);
    const problems = spec(name).judge(o).problems;
    expect(problems.length, `no problem found`).toBeGreaterThan(0);
    expect(problems.join('\n')).toMatch(says);
  });

  it('an agent that never answers a probe is conformant, with a note (answering is a should)', () => {
    const o = conforming('probe');
    o.probes!.held = [];
    const v = spec('probe').judge(o);
    expect(v.problems).toEqual([]);
    expect(v.notes.join('\n')).toMatch(/no instance answered the probe/);
  });

  it('finds integers encoded as floats, by path', () => {
    // msgpack: {attempt: 1.0 (float64), tries: 1, output: {amount: 2.5 (float64)}}
    const bytes = Uint8Array.from([0x83, 0xa7, ...Buffer.from('attempt'), 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xa5, ...Buffer.from('tries'), 0x01, 0xa6, ...Buffer.from('output'), 0x81, 0xa6, ...Buffer.from('amount'), 0xcb, 0x40, 0x04, 0, 0, 0, 0, 0, 0]);
    expect(floatPaths(bytes)).toEqual(['attempt', 'output.amount']);
    expect(floatPaths(encode({ attempt: 1, finishedAt: Date.now(), tries: 2 }))).toEqual([]);
  });
});
