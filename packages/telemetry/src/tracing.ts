/**
 * Trace context across the bus: W3C `traceparent`/`tracestate` in NATS headers (docs/protocol.md), and
 * the span helpers the actors use. Only @opentelemetry/api: with no SDK registered (OTEL_* unset) every
 * call here is a no-op and no header is written.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';

export { SpanKind, SpanStatusCode, ROOT_CONTEXT, context, trace, type Attributes, type Context, type Link, type Span };

/** The instrumentation scope of every Triad span. */
export const TRACER_NAME = '@triad/runtime';

/** The headers trace context travels in (W3C Trace Context). */
export const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;

let cachedTracer: ReturnType<typeof trace.getTracer> | undefined;

/**
 * Triad's tracer, got once: with no SDK registered yet the API hands out a proxy that delegates to the
 * provider registered later, so caching it is safe (and saves a new proxy per span).
 */
export function tracer() {
  cachedTracer ??= trace.getTracer(TRACER_NAME);
  return cachedTracer;
}

/** Whether a propagator is registered (an SDK is configured): callers skip work that only feeds traces. */
export function tracingEnabled(): boolean {
  return propagation.fields().length > 0;
}

/** What a NATS message's headers look like to a reader (nats.js MsgHdrs fits; get returns '' when absent). */
export interface HeaderReader {
  get(key: string): string;
}

const headerGetter: TextMapGetter<HeaderReader | undefined> = {
  get: (carrier, key) => {
    const v = carrier?.get(key);
    return v === undefined || v === '' ? undefined : v;
  },
  keys: () => [...TRACE_HEADERS],
};

/** The trace context a message carries (the root context when it carries none). */
export function contextFromHeaders(h: HeaderReader | undefined): Context {
  if (!h) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, h, headerGetter);
}

/** The trace headers of `ctx` (the active context unless told): empty when no span is recording or no SDK is set. */
export function traceHeaders(ctx: Context = context.active()): Record<string, string> {
  const out: Record<string, string> = {};
  propagation.inject(ctx, out);
  return out;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
}

/**
 * Runs `fn` inside a new span, child of `parent` (the active context unless told): the span is active
 * while `fn` runs (so publishes carry it and logs name it), ends when `fn` settles, and records an
 * exception as an error status. `fn` may set the outcome attributes itself.
 */
export async function inSpan<T>(name: string, o: SpanOptions, fn: (span: Span) => Promise<T>, parent: Context = context.active()): Promise<T> {
  const span = tracer().startSpan(name, o, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (e) {
    span.recordException(e instanceof Error ? e : String(e));
    span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
    throw e;
  } finally {
    span.end();
  }
}

/** The valid span context of `ctx`, if it has one (for a link). */
export function spanContextOf(ctx: Context) {
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? sc : undefined;
}
