/**
 * @triad/telemetry — what the Triad libraries report, with no I/O of their own: the logging interface
 * actors accept (Logger; pino satisfies it), the triad_* Prometheus
 * metrics (prom-client's registry, labelled by namespace) and W3C trace context carried in NATS headers
 * (@opentelemetry/api). The process shell (@triad/service) serves the metrics over HTTP and configures
 * the OpenTelemetry SDK from OTEL_* variables; decision 0013.
 */
export { triadMetrics, metricsRegistry, deadLetterReasonClass, recordTaskEnded, countTaskEnd, STEP_OUTCOMES, type StepOutcomeLabel, type TriadMetrics } from './metrics.js';
export { intercept, type Interceptor, type Next } from './interceptors.js';
export { silentLogger, type Logger } from './logger.js';
export {
  TRACER_NAME,
  TRACE_HEADERS,
  tracer,
  tracingEnabled,
  contextFromHeaders,
  traceHeaders,
  inSpan,
  spanContextOf,
  SpanKind,
  SpanStatusCode,
  ROOT_CONTEXT,
  context,
  trace,
  type Attributes,
  type Context,
  type HeaderReader,
  type Link,
  type Span,
  type SpanOptions,
} from './tracing.js';
