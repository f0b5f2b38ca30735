/**
 * defineAgent: the typed API a user writes agents with. A handler receives the task input, the outputs
 * it declared it needs, the idempotency key, the attempt, completeBy and an AbortSignal that fires at
 * completeBy (less a safety margin).
 *
 * @example
 *   export const payment = defineAgent({
 *     name: 'payment',
 *     input: z.object({ orderId: z.string(), amount: z.number() }),
 *     async handler({ input, idempotencyKey, signal }) {
 *       return charge(input.amount, { idempotencyKey, signal });
 *     },
 *   });
 */
import type { z } from 'zod';
import type { RetryPolicy, StepKind } from '@triad/protocol';

export interface StepContext<I> {
  readonly input: I;
  /** Outputs of the steps this step declared it needs, by step name. */
  readonly needs: Readonly<Record<string, unknown>>;
  readonly taskId: string;
  readonly step: string;
  readonly kind: StepKind;
  /** The scheduler's attempt number for this step (grows on each supervisor retry). */
  readonly attempt: number;
  /** Handler calls so far in this attempt, 1-based (agent-side retries inside the window). */
  readonly try: number;
  /** Pass to the remote service: it must apply the effect once per key. Stable across attempts. */
  readonly idempotencyKey: string;
  /** In a compensation: the idempotency key of the effect to undo (the step's own run key). */
  readonly undoes?: string;
  /**
   * In a compensation: 'applied' when the run completed, 'unknown' when it may or may not have taken
   * effect (it timed out, its agent died, or it was in flight when the undo began). Either way the undo
   * must succeed, and an undo of a key never applied must make a later apply of it a no-op (a
   * tombstone), because that late apply can still arrive (decision 0009).
   */
  readonly effect?: 'applied' | 'unknown';
  /** Absolute deadline, epoch ms. */
  readonly completeBy: number;
  /**
   * For a step that runs once per element of a list (`forEach`, decision 0019 §4): this call's element —
   * its 0-based `index`, the list's `count`, and its `value`. `input` stays the task input, and
   * `idempotencyKey` is the element's own (`…/<step>/<index>`).
   */
  readonly item?: { readonly index: number; readonly count: number; readonly value: unknown };
  /** Fires when the window closes: stop work; whatever is returned after it is discarded. */
  readonly signal: AbortSignal;
}

/** Steps one agent host process handles at once for an agent type that sets no `concurrency`. */
export const DEFAULT_AGENT_CONCURRENCY = 32;

export interface AgentDefinition<I = unknown, O = unknown> {
  readonly name: string;
  /** Validates the task input for this agent; a mismatch is a permanent failure with the zod message. */
  readonly input?: z.ZodType<I>;
  // Method syntax on purpose: agents of different input types share one list (AgentDefinition[]).
  handler(ctx: StepContext<I>): Promise<O>;
  /**
   * Undoes what `handler` did (release a reservation, refund a charge), for workflows whose steps name
   * this agent in `compensate`. `ctx.undoes` is the run's idempotency key; `ctx.needs[ctx.step]` holds
   * the step's own output when `ctx.effect` is 'applied'; `ctx.kind` is 'compensate'. Without it, compensation requests go to `handler` with `ctx.kind === 'compensate'`.
   */
  compensate?(ctx: StepContext<I>): Promise<unknown>;
  /** Agent-side retry inside the window, used when the step's definition sets none. */
  readonly retry?: RetryPolicy;
  /** Steps handled at once by one process (default DEFAULT_AGENT_CONCURRENCY). */
  readonly concurrency?: number;
  /**
   * The circuit breaker around this agent's remote service (one per agent type and process): after
   * `threshold` consecutive retryable failures it opens for `halfOpenAfterMs`, then lets one trial call
   * through. While open, steps are parked without counting a failure.
   */
  readonly breaker?: { threshold?: number; halfOpenAfterMs?: number };
}

export function defineAgent<I = unknown, O = unknown>(def: AgentDefinition<I, O>): AgentDefinition<I, O> {
  return def;
}
