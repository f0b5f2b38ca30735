// Proves runStep's contract inside the complete-by window: success, bounded retries, permanent errors, input validation, and silence (expired) once the window closes.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConsecutiveBreaker, circuitBreaker, handleWhen } from 'cockatiel';
import type { StepRequest } from '@triad/protocol';
import { PermanentError, RetryableError, defineAgent, isPermanent, resultMessageId, runStep, type StepContext } from '../src/index.js';

function request(over: Partial<StepRequest> = {}): StepRequest {
  const now = Date.now();
  return {
    taskId: 'order-1',
    workflow: 'orders',
    version: 1,
    step: 'charge',
    agent: 'payment',
    kind: 'run',
    attempt: 2,
    idempotencyKey: 'test:order-1:charge',
    completeBy: now + 10_000,
    input: { orderId: 'o-1', amount: 42 },
    needs: { reserve: { reservationId: 'r-1' } },
    retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 1 },
    dispatchedAt: now,
    ...over,
  };
}

/** An agent whose handler runs `impl` and records every context it was called with. */
function recordingAgent<O>(impl: (ctx: StepContext<unknown>) => O | Promise<O>, extra: { retry?: { maxAttempts: number; initialDelayMs: number; maxDelayMs: number } } = {}) {
  const calls: StepContext<unknown>[] = [];
  const agent = defineAgent<unknown, O>({
    name: 'payment',
    ...extra,
    async handler(ctx) {
      calls.push(ctx);
      return await impl(ctx);
    },
  });
  return { agent, calls };
}

const opts = { safetyMarginMs: 0, random: () => 0 };

describe('runStep', () => {
  it('succeeds on the first try and passes the request through to the handler', async () => {
    const req = request();
    const { agent, calls } = recordingAgent((ctx) => ({ chargeId: `ch-${String((ctx.input as { orderId: string }).orderId)}` }));
    const outcome = await runStep(req, agent, opts);
    expect(outcome).toEqual({ kind: 'ok', output: { chargeId: 'ch-o-1' }, tries: 1 });
    expect(calls).toHaveLength(1);
    const ctx = calls[0] as StepContext<unknown>;
    expect(ctx.input).toEqual({ orderId: 'o-1', amount: 42 });
    expect(ctx.needs).toEqual({ reserve: { reservationId: 'r-1' } });
    expect(ctx).toMatchObject({ taskId: 'order-1', step: 'charge', kind: 'run', attempt: 2, try: 1, idempotencyKey: 'test:order-1:charge', completeBy: req.completeBy });
    expect(ctx.signal).toBeInstanceOf(AbortSignal);
  });

  it("gives the handler a fan-out element (decision 0019 §4): item with its index, count and value; input stays the task input", async () => {
    const req = request({ item: { index: 2, count: 5, value: { sku: 'c' } }, idempotencyKey: 'test/order-1/charge/2' });
    const { agent, calls } = recordingAgent((ctx) => ctx.item?.value);
    expect(await runStep(req, agent, opts)).toEqual({ kind: 'ok', output: { sku: 'c' }, tries: 1 });
    expect(calls[0]).toMatchObject({ item: { index: 2, count: 5, value: { sku: 'c' } }, input: { orderId: 'o-1', amount: 42 }, idempotencyKey: 'test/order-1/charge/2' });
    // A step that is not a fan-out has no item.
    const plain = recordingAgent(() => 1);
    await runStep(request(), plain.agent, opts);
    expect(plain.calls[0]).not.toHaveProperty('item');
  });

  it('names the element in its result message id, so the results of different elements at one attempt are not taken for repeats', () => {
    expect(resultMessageId(request())).toBe('order-1:charge:run:2:result');
    expect(resultMessageId(request({ item: { index: 0, count: 2 } }))).toBe('order-1:charge#0:run:2:result');
    expect(resultMessageId(request({ item: { index: 1, count: 2 } }))).toBe('order-1:charge#1:run:2:result');
  });

  it('retries retryable errors up to maxAttempts, then reports failed retryable:true with the last error', async () => {
    let n = 0;
    const { agent, calls } = recordingAgent(() => {
      n++;
      throw new Error(`service unavailable #${n}`);
    });
    const outcome = await runStep(request({ retry: { maxAttempts: 4, initialDelayMs: 1, maxDelayMs: 1 } }), agent, opts);
    expect(outcome).toEqual({ kind: 'failed', retryable: true, message: 'service unavailable #4', name: 'Error', tries: 4, effect: 'unknown' });
    expect(calls.map((c) => c.try)).toEqual([1, 2, 3, 4]);
    // The same idempotency key and attempt on every try inside the window.
    expect(new Set(calls.map((c) => `${c.idempotencyKey}#${c.attempt}`)).size).toBe(1);
  });

  it('succeeds after transient errors, counting the tries', async () => {
    const { agent } = recordingAgent((ctx) => {
      if (ctx.try < 3) throw new Error('flaky');
      return 'done';
    });
    expect(await runStep(request({ retry: { maxAttempts: 5, initialDelayMs: 1, maxDelayMs: 1 } }), agent, opts)).toEqual({ kind: 'ok', output: 'done', tries: 3 });
  });

  it('reports a PermanentError at once: retryable false, tries 1', async () => {
    const { agent, calls } = recordingAgent(() => {
      throw new PermanentError('card declined');
    });
    const outcome = await runStep(request({ retry: { maxAttempts: 5, initialDelayMs: 1, maxDelayMs: 1 } }), agent, opts);
    expect(outcome).toEqual({ kind: 'failed', retryable: false, message: 'card declined', name: 'PermanentError', tries: 1, effect: 'unknown' });
    expect(calls).toHaveLength(1);
  });

  it('treats any error with retryable:false as permanent (an Error subclass or a plain object)', async () => {
    class Declined extends Error {
      override name = 'Declined';
      readonly retryable = false;
    }
    const first = recordingAgent(() => {
      throw new Declined('insufficient funds');
    });
    expect(await runStep(request({ retry: { maxAttempts: 5, initialDelayMs: 1, maxDelayMs: 1 } }), first.agent, opts)).toEqual({
      kind: 'failed',
      retryable: false,
      message: 'insufficient funds',
      name: 'Declined',
      tries: 1,
      effect: 'unknown',
    });
    const second = recordingAgent(() => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- a non-Error with retryable:false on purpose
      throw { code: 'E_BAD', retryable: false };
    });
    const o2 = await runStep(request({ retry: { maxAttempts: 5, initialDelayMs: 1, maxDelayMs: 1 } }), second.agent, opts);
    expect(o2).toMatchObject({ kind: 'failed', retryable: false, tries: 1 });
    expect(second.calls).toHaveLength(1);
    expect(isPermanent({ retryable: true })).toBe(false);
    expect(isPermanent(new Error('x'))).toBe(false);
  });

  it('a thrown non-Error is retried and reported with its text', async () => {
    const { agent } = recordingAgent(() => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- a thrown string on purpose
      throw 'socket hang up';
    });
    const outcome = await runStep(request({ retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } }), agent, opts);
    expect(outcome).toEqual({ kind: 'failed', retryable: true, message: 'socket hang up', tries: 2, effect: 'unknown' });
  });

  it('uses the request retry policy first, then the agent policy', async () => {
    const failing = () => recordingAgent(() => Promise.reject(new Error('nope')), { retry: { maxAttempts: 5, initialDelayMs: 1, maxDelayMs: 1 } });
    const a = failing();
    expect(await runStep(request({ retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } }), a.agent, opts)).toMatchObject({ kind: 'failed', tries: 2 });
    const b = failing();
    const noRetry = request();
    delete noRetry.retry;
    expect(await runStep(noRetry, b.agent, opts)).toMatchObject({ kind: 'failed', tries: 5 });
  });

  it('returns expired with tries 0 and never calls the handler when completeBy (less the margin) has passed', async () => {
    const { agent, calls } = recordingAgent(() => 'should not run');
    const now = () => 1_000_000;
    expect(await runStep(request({ completeBy: 1_000_040 }), agent, { safetyMarginMs: 50, now })).toEqual({ kind: 'expired', tries: 0 });
    expect(await runStep(request({ completeBy: 1_000_050 }), agent, { safetyMarginMs: 50, now })).toEqual({ kind: 'expired', tries: 0 });
    expect(await runStep(request({ completeBy: 999_000 }), agent, { safetyMarginMs: 0, now })).toEqual({ kind: 'expired', tries: 0 });
    expect(calls).toHaveLength(0);
    // With time left (beyond the margin) the handler runs.
    const fast = recordingAgent(() => 'ran');
    expect(await runStep(request({ completeBy: Date.now() + 5_000 }), fast.agent, { safetyMarginMs: 50 })).toMatchObject({ kind: 'ok', output: 'ran' });
  });

  it('a handler that hangs past completeBy yields expired and its signal is aborted with the complete-by reason', async () => {
    // completeBy = now + 150; the injected clock makes the window exactly 150 ms however slow the machine.
    const base = Date.now();
    let seen: AbortSignal | undefined;
    const { agent } = recordingAgent((ctx) => {
      seen = ctx.signal;
      return new Promise<never>(() => undefined);
    });
    const outcome = await runStep(request({ completeBy: base + 150 }), agent, { safetyMarginMs: 0, now: () => base });
    expect(outcome).toEqual({ kind: 'expired', tries: 1 });
    expect(seen?.aborted).toBe(true);
    expect(String((seen?.reason as Error | undefined)?.message)).toMatch(/complete-by .* reached/);
  });

  it("makes the handler's AbortSignal only when the handler reads it: one read after the step ended is already aborted, one read after an external abort carries its reason", async () => {
    // A handler that never reads ctx.signal (the common no-op step): no controller, the step still ends.
    let kept: StepContext<unknown> | undefined;
    const { agent } = recordingAgent((ctx) => {
      kept = ctx;
      return 'done';
    });
    expect(await runStep(request(), agent, opts)).toEqual({ kind: 'ok', output: 'done', tries: 1 });
    const late = kept?.signal;
    expect(late?.aborted).toBe(true);
    expect((late?.reason as Error | undefined)?.message).toBe('step finished');
    // The same signal on every read within a step.
    expect(kept?.signal).toBe(late);
    // An external abort (the agent lost its lease) closes the window whether or not the signal was read.
    const external = new AbortController();
    let seen: AbortSignal | undefined;
    const hang = recordingAgent(() => {
      queueMicrotask(() => external.abort(new Error('lease lost')));
      return new Promise<never>(() => undefined);
    });
    const grab = recordingAgent((ctx) => {
      seen = ctx.signal;
      return new Promise<never>(() => undefined);
    });
    expect(await runStep(request(), hang.agent, { ...opts, signal: external.signal })).toEqual({ kind: 'expired', tries: 1 });
    expect((hang.calls[0]?.signal.reason as Error | undefined)?.message).toBe('lease lost');
    const external2 = new AbortController();
    setTimeout(() => external2.abort(new Error('lease lost again')), 20);
    expect(await runStep(request(), grab.agent, { ...opts, signal: external2.signal })).toEqual({ kind: 'expired', tries: 1 });
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as Error | undefined)?.message).toBe('lease lost again');
  });

  it('a handler that honours the signal (rejects on abort) yields expired, not failed', async () => {
    // completeBy = now + 150; the injected clock makes the window exactly 150 ms however slow the machine.
    const base = Date.now();
    const { agent } = recordingAgent(
      (ctx) =>
        new Promise<never>((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => reject(new Error('aborted by signal')), { once: true });
        }),
    );
    expect(await runStep(request({ completeBy: base + 150 }), agent, { safetyMarginMs: 0, now: () => base })).toEqual({ kind: 'expired', tries: 1 });
  });

  it('a handler that ignores the signal and returns late still yields expired (its output is discarded)', async () => {
    // completeBy = now + 150; the injected clock makes the window exactly 150 ms however slow the machine.
    // The handler returns only when the test lets it, after runStep has answered: no race with a timer.
    const base = Date.now();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finished = false;
    const { agent } = recordingAgent(async () => {
      await gate;
      finished = true;
      return 'too late';
    });
    const outcome = await runStep(request({ completeBy: base + 150 }), agent, { safetyMarginMs: 0, now: () => base });
    expect(outcome).toEqual({ kind: 'expired', tries: 1 });
    expect(finished).toBe(false);
    // Its late return changes nothing.
    release();
    await gate;
    await Promise.resolve();
    expect(finished).toBe(true);
    expect(outcome).toEqual({ kind: 'expired', tries: 1 });
  });

  it('validates the input with the agent schema: failed, retryable false, the message names the field, handler not called', async () => {
    const calls: unknown[] = [];
    const agent = defineAgent({
      name: 'payment',
      input: z.object({ orderId: z.string(), amount: z.number().positive() }),
      handler(ctx) {
        calls.push(ctx.input);
        return Promise.resolve(ctx.input.amount);
      },
    });
    const outcome = await runStep(request({ input: { orderId: 'o-1', amount: 'ten' } }), agent, opts);
    expect(outcome).toMatchObject({ kind: 'failed', retryable: false, name: 'InvalidInput' });
    if (outcome.kind !== 'failed') throw new Error('unreachable');
    expect(outcome.message).toContain('payment');
    expect(outcome.message).toMatch(/amount: /);
    expect(outcome.message).not.toMatch(/orderId: /);
    expect(calls).toHaveLength(0);
    // A valid input reaches the handler as the schema's output.
    const ok = await runStep(request({ input: { orderId: 'o-1', amount: 7 } }), agent, opts);
    expect(ok).toEqual({ kind: 'ok', output: 7, tries: 1 });
  });

  it('the handler receives the parsed input (defaults and transforms applied)', async () => {
    const agent = defineAgent({
      name: 'payment',
      input: z.object({ amount: z.number(), currency: z.string().default('EUR') }),
      handler(ctx) {
        return Promise.resolve(ctx.input);
      },
    });
    expect(await runStep(request({ input: { amount: 3 } }), agent, opts)).toEqual({ kind: 'ok', output: { amount: 3, currency: 'EUR' }, tries: 1 });
  });

  it('reports failed retryable:true at once when the next back-off would cross the deadline', async () => {
    // First back-off: random 0 → 0 ms; second: ceiling 2 s, random ~1 → ~2 s, past a 1.5 s window.
    const randoms = [0, 1 - Number.EPSILON];
    const random = () => randoms.shift() ?? 0;
    const { agent, calls } = recordingAgent(() => Promise.reject(new Error('busy')));
    const base = Date.now();
    const outcome = await runStep(request({ completeBy: base + 1_500, retry: { maxAttempts: 10, initialDelayMs: 1_000, maxDelayMs: 60_000 } }), agent, {
      safetyMarginMs: 0,
      now: () => base,
      random,
    });
    // Had it waited, the window would have closed and the outcome would be 'expired'.
    expect(outcome).toEqual({ kind: 'failed', retryable: true, message: 'busy', name: 'Error', tries: 2, effect: 'unknown' });
    expect(calls).toHaveLength(2);
  });

  it('does not start a back-off that cannot finish inside the window even on the first retry', async () => {
    const { agent, calls } = recordingAgent(() => Promise.reject(new Error('busy')));
    const base = Date.now();
    const outcome = await runStep(request({ completeBy: base + 1_000, retry: { maxAttempts: 5, initialDelayMs: 60_000, maxDelayMs: 60_000 } }), agent, {
      safetyMarginMs: 0,
      now: () => base,
      random: () => 0.5,
    });
    expect(outcome).toEqual({ kind: 'failed', retryable: true, message: 'busy', name: 'Error', tries: 1, effect: 'unknown' });
    expect(calls).toHaveLength(1);
  });
});

describe('runStep with a circuit breaker', () => {
  it('does not call the handler while the breaker is open and says when to try again', async () => {
    const policy = circuitBreaker(handleWhen((e) => !isPermanent(e)), { halfOpenAfter: 60_000, breaker: new ConsecutiveBreaker(1) });
    const breaker = { policy, halfOpenAfterMs: 60_000 };
    let calls = 0;
    const flaky = defineAgent({
      name: 'flaky',
      retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 },
      handler: () => {
        calls++;
        return Promise.reject(new Error('503'));
      },
    });
    const first = await runStep(request({ agent: 'flaky', completeBy: Date.now() + 5_000, retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 } }), flaky, { safetyMarginMs: 0, breaker });
    expect(first).toMatchObject({ kind: 'failed', retryable: true, tries: 1 });
    const second = await runStep(request({ agent: 'flaky', completeBy: Date.now() + 5_000, retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 } }), flaky, { safetyMarginMs: 0, breaker });
    expect(second).toEqual({ kind: 'circuit_open', retryAfterMs: 60_000, tries: 0 });
    expect(calls).toBe(1);
  });

  it('is not opened by permanent failures (they say nothing about the service)', async () => {
    const policy = circuitBreaker(handleWhen((e) => !isPermanent(e)), { halfOpenAfter: 60_000, breaker: new ConsecutiveBreaker(1) });
    const refusing = defineAgent({ name: 'refusing', handler: () => Promise.reject(new PermanentError('declined')) });
    for (let i = 0; i < 3; i++) {
      const r = await runStep(request({ agent: 'refusing', completeBy: Date.now() + 5_000 }), refusing, { safetyMarginMs: 0, breaker: { policy, halfOpenAfterMs: 60_000 } });
      expect(r).toMatchObject({ kind: 'failed', retryable: false });
    }
  });
});

describe('runStep with a handler that throws synchronously', () => {
  it('treats the throw like a rejection (retried, then reported), never as a crash of the agent', async () => {
    let calls = 0;
    const sync = defineAgent({
      name: 'sync',
      handler: () => {
        calls++;
        throw new Error('thrown before any promise');
      },
    });
    const r = await runStep(request({ agent: 'sync', completeBy: Date.now() + 5_000, retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } }), sync, { safetyMarginMs: 0, random: () => 0 });
    expect(r).toMatchObject({ kind: 'failed', retryable: true, tries: 2, message: 'thrown before any promise' });
    expect(calls).toBe(2);
  });
});

describe('runStep and the remote effect (decision 0009)', () => {
  it("reports effect 'none' only when every try failed with an error marked notApplied", async () => {
    const refused = recordingAgent(() => {
      throw new RetryableError('connection refused', { notApplied: true });
    });
    expect(await runStep(request(), refused.agent, opts)).toMatchObject({ kind: 'failed', retryable: true, tries: 3, effect: 'none' });
    const declined = recordingAgent(() => {
      throw new PermanentError('402 declined', { notApplied: true });
    });
    expect(await runStep(request(), declined.agent, opts)).toMatchObject({ kind: 'failed', retryable: false, tries: 1, effect: 'none' });
    // One try that may have reached the service (a timeout, a 500) makes the attempt's effect unknown.
    let n = 0;
    const mixed = recordingAgent(() => {
      n++;
      throw n === 2 ? new Error('socket hang up') : new RetryableError('503', { notApplied: true });
    });
    expect(await runStep(request(), mixed.agent, opts)).toMatchObject({ kind: 'failed', tries: 3, effect: 'unknown' });
    // Input that fails validation never reaches the handler.
    const typed = defineAgent({ name: 'payment', input: z.object({ orderId: z.number() }), handler: () => Promise.resolve('never') });
    expect(await runStep(request(), typed, opts)).toMatchObject({ kind: 'failed', tries: 0, effect: 'none' });
  });

  it('passes a compensation the effect it undoes', async () => {
    const { agent, calls } = recordingAgent(() => 'undone');
    await runStep(request({ kind: 'compensate', undoes: 'test:order-1:charge', effect: 'unknown' }), agent, opts);
    expect(calls[0]).toMatchObject({ kind: 'compensate', undoes: 'test:order-1:charge', effect: 'unknown' });
  });

  it('a breaker that opens after a try that may have taken effect reports a failure with effect unknown, not a refusal', async () => {
    const policy = circuitBreaker(handleWhen((e) => !isPermanent(e)), { halfOpenAfter: 60_000, breaker: new ConsecutiveBreaker(1) });
    const flaky = defineAgent({ name: 'flaky', handler: () => Promise.reject(new Error('500')) });
    const r = await runStep(request({ agent: 'flaky', retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 1 } }), flaky, { ...opts, breaker: { policy, halfOpenAfterMs: 60_000 } });
    expect(r).toMatchObject({ kind: 'failed', retryable: true, tries: 1, effect: 'unknown' });
  });
});
