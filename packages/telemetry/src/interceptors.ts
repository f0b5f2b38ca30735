/**
 * Cross-cutting work (tracing, metrics) as `(input, next)` interceptors around an actor's handlers, the
 * way Temporal's SDK composes them: the handler holds the logic only, and each interceptor sees its
 * input and its output. The actors define their interceptors next to their handlers' types.
 */

/** A handler, or what an interceptor calls to run the rest of the chain. */
export type Next<I, O> = (input: I) => Promise<O>;

/** Runs around a handler: may act before and after `next`, read its output, or not call it at all. */
export type Interceptor<I, O> = (input: I, next: Next<I, O>) => Promise<O>;

/** `handler` wrapped by `interceptors`, the first one outermost. */
export function intercept<I, O>(handler: Next<I, O>, ...interceptors: readonly Interceptor<I, O>[]): Next<I, O> {
  return interceptors.reduceRight<Next<I, O>>((next, interceptor) => (input) => interceptor(input, next), handler);
}
