/**
 * Runs one step request inside its complete-by window: agent-side retries with full-jitter back-off,
 * permanent errors recognised, and silence once the window closes. Elapsed time is measured on the
 * monotonic clock; only the deadline itself is a wall-clock time (it comes from another machine).
 */
import { performance } from 'node:perf_hooks';
import { DEFAULT_RETRY, fullJitterDelay } from '@triad/core';
import { BrokenCircuitError, type CircuitBreakerPolicy } from 'cockatiel';
import { DEFAULT_THROTTLE_RETRY_AFTER_MS, MAX_THROTTLE_RETRY_AFTER_MS, errorMessage, type StepRequest } from '@triad/protocol';
import type { AgentDefinition, StepContext } from './define.js';
import { isNotApplied, isPermanent, isThrottled } from './errors.js';

export type StepOutcome =
  | { kind: 'ok'; output: unknown; tries: number }
  /**
   * `effect` 'none': no try can have taken effect (each one failed with an error marked notApplied, or
   * none was made); 'unknown': some try may have reached the service (decision 0009).
   */
  | { kind: 'failed'; message: string; name?: string; retryable: boolean; tries: number; effect: 'none' | 'unknown' }
  /** The window closed (or had closed on arrival): send nothing back. */
  | { kind: 'expired'; tries: number }
  /** The circuit breaker is open: the service was not called; try again after retryAfterMs. */
  | { kind: 'circuit_open'; retryAfterMs: number; tries: number }
  /**
   * The service refused the call and asked for time (a ThrottledError, decision 0020 §5.2): the attempt
   * ended at once, with no further try. `effect` as for a failure: the refused try applied nothing.
   */
  | { kind: 'throttled'; message: string; retryAfterMs: number; tries: number; effect: 'none' | 'unknown' };

export interface RunStepOptions {
  /** Subtracted from completeBy to allow for clock skew between machines. */
  safetyMarginMs: number;
  now?: () => number;
  random?: () => number;
  /** Aborts the step from outside (the agent lost its step lease): treated like the window closing. */
  signal?: AbortSignal;
  /** Every handler call goes through it; while it is open no call is made. */
  breaker?: { policy: CircuitBreakerPolicy; halfOpenAfterMs: number };
  /** Told of each try as it starts, and of each back-off between tries with its end (what a probe answers, decision 0021 §3.3). */
  onTry?: (t: number, state: 'calling' | 'backing_off', nextTryAt?: number) => void;
}

/** The abort reason handlers see once their step is over (shared: one Error, not one per step). */
const STEP_FINISHED = new Error('step finished');

export async function runStep(req: StepRequest, agent: AgentDefinition, o: RunStepOptions): Promise<StepOutcome> {
  const wallNow = o.now ?? Date.now;
  const windowMs = req.completeBy - o.safetyMarginMs - wallNow();
  if (windowMs <= 0) return { kind: 'expired', tries: 0 };
  const deadline = performance.now() + windowMs;
  // The window closes by the timer or the external signal. The handlers' AbortSignal is made only when a
  // handler reads `ctx.signal` (a step that never does costs no AbortController, no abort event).
  let closedBy: { reason: unknown } | undefined;
  let controller: AbortController | undefined;
  let onClose!: (v: 'closed') => void;
  const closed = new Promise<'closed'>((resolve) => (onClose = resolve));
  const close = (reason: unknown): void => {
    if (closedBy) return;
    closedBy = { reason };
    controller?.abort(reason);
    onClose('closed');
  };
  const signal = (): AbortSignal => {
    if (!controller) {
      controller = new AbortController();
      if (closedBy) controller.abort(closedBy.reason);
    }
    return controller.signal;
  };
  const timer = setTimeout(() => close(new Error(`complete-by ${new Date(req.completeBy).toISOString()} reached`)), windowMs);
  const external = o.signal;
  const onExternal = (): void => close(external?.reason);
  if (external?.aborted) onExternal();
  else external?.addEventListener('abort', onExternal, { once: true });
  try {
    let input: unknown = req.input;
    if (agent.input) {
      const parsed = agent.input.safeParse(req.input);
      if (!parsed.success) {
        const detail = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
        return { kind: 'failed', message: `input for agent "${agent.name}" is invalid: ${detail}`, name: 'InvalidInput', retryable: false, tries: 0, effect: 'none' };
      }
      input = parsed.data;
    }
    const policy = req.retry ?? agent.retry ?? DEFAULT_RETRY;
    // Whether any try so far may have reached the service: only errors marked notApplied rule it out.
    let mayHaveApplied = false;
    for (let t = 1; ; t++) {
      const ctx: StepContext<unknown> = {
        input,
        needs: req.needs,
        taskId: req.taskId,
        step: req.step,
        kind: req.kind,
        attempt: req.attempt,
        try: t,
        idempotencyKey: req.idempotencyKey,
        ...(req.undoes ? { undoes: req.undoes } : {}),
        ...(req.effect ? { effect: req.effect } : {}),
        completeBy: req.completeBy,
        ...(req.item ? { item: { index: req.item.index, count: req.item.count, value: req.item.value } } : {}),
        get signal() {
          return signal();
        },
      };
      let outcome: { ok: true; value: unknown } | { ok: false; error: unknown } | 'closed';
      // Promise.resolve().then: a handler that throws synchronously becomes a rejection like any other.
      o.onTry?.(t, 'calling');
      const run = (): Promise<unknown> => Promise.resolve().then(() => (req.kind === 'compensate' && agent.compensate ? agent.compensate(ctx) : agent.handler(ctx)));
      const call = o.breaker ? o.breaker.policy.execute(run) : run();
      try {
        outcome = await Promise.race([call.then((value) => ({ ok: true as const, value })), closed]);
      } catch (error) {
        outcome = { ok: false, error };
      }
      if (outcome === 'closed' || closedBy) return { kind: 'expired', tries: t };
      if (!outcome.ok && outcome.error instanceof BrokenCircuitError) {
        // Refused by the breaker on this try: only the earlier tries called the service.
        if (!mayHaveApplied) return { kind: 'circuit_open', retryAfterMs: o.breaker?.halfOpenAfterMs ?? 0, tries: t - 1 };
        return { kind: 'failed', message: errorMessage(outcome.error), name: 'BrokenCircuitError', retryable: true, tries: t - 1, effect: 'unknown' };
      }
      if (outcome.ok) return { kind: 'ok', output: outcome.value, tries: t };
      const e = outcome.error;
      if (isThrottled(e)) {
        // The service asked for time: no other try inside this window (the scheduler puts the step back).
        const after = (e as { retryAfterMs?: unknown }).retryAfterMs;
        const retryAfterMs = typeof after === 'number' && Number.isFinite(after) ? Math.min(Math.max(0, Math.round(after)), MAX_THROTTLE_RETRY_AFTER_MS) : DEFAULT_THROTTLE_RETRY_AFTER_MS;
        return { kind: 'throttled', message: errorMessage(e), retryAfterMs, tries: t, effect: mayHaveApplied ? 'unknown' : 'none' };
      }
      if (!isNotApplied(e)) mayHaveApplied = true;
      const name = e instanceof Error ? e.name : undefined;
      const base = { message: errorMessage(e), ...(name ? { name } : {}), tries: t, effect: mayHaveApplied ? ('unknown' as const) : ('none' as const) };
      if (isPermanent(e)) return { kind: 'failed', retryable: false, ...base };
      if (t >= policy.maxAttempts) return { kind: 'failed', retryable: true, ...base };
      const delay = fullJitterDelay(policy, t, o.random);
      // No time for another try: say so now rather than stay silent until the window closes.
      if (performance.now() + delay >= deadline) return { kind: 'failed', retryable: true, ...base };
      o.onTry?.(t, 'backing_off', wallNow() + delay);
      const woke = await Promise.race([new Promise<'slept'>((r) => setTimeout(() => r('slept'), delay)), closed]);
      if (woke === 'closed') return { kind: 'expired', tries: t };
    }
  } finally {
    clearTimeout(timer);
    external?.removeEventListener('abort', onExternal);
    // A signal read later (a handler that kept its context) is already aborted.
    close(STEP_FINISHED);
  }
}
