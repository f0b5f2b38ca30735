/**
 * The OpenTelemetry SDK of a Triad process, configured from the standard OTEL_* variables and off when
 * they are unset: spans go to an OTLP/HTTP exporter (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp|console), fetch calls are traced
 * (undici instrumentation), and W3C trace context is the propagator. Decision 0013.
 */
import { propagation } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { detectResources, envDetector, hostDetector, processDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, ConsoleSpanExporter, NodeTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-node';

export interface Tracing {
  /** Flushes the spans still buffered and stops exporting. */
  shutdown(): Promise<void>;
}

const EXPORTERS = ['otlp', 'console', 'none'] as const;

/**
 * Which exporter the environment asks for, or undefined when tracing is off (nothing set, `none`, or
 * OTEL_SDK_DISABLED=true). A value that is not understood is refused with what to set instead.
 */
export function traceExporterFromEnv(env: NodeJS.ProcessEnv = process.env): 'otlp' | 'console' | undefined {
  if ((env['OTEL_SDK_DISABLED'] ?? '').trim().toLowerCase() === 'true') return undefined;
  const named = (env['OTEL_TRACES_EXPORTER'] ?? '').trim().toLowerCase();
  if (named !== '') {
    const first = named.split(',')[0]!.trim();
    if (!(EXPORTERS as readonly string[]).includes(first)) {
      throw new Error(`OTEL_TRACES_EXPORTER=${JSON.stringify(named)} is not supported here: use otlp (with OTEL_EXPORTER_OTLP_ENDPOINT), console, or none`);
    }
    return first === 'none' ? undefined : (first as 'otlp' | 'console');
  }
  const endpoint = (env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? env['OTEL_EXPORTER_OTLP_ENDPOINT'] ?? '').trim();
  return endpoint !== '' ? 'otlp' : undefined;
}

/**
 * Starts tracing for the process `serviceName` (OTEL_SERVICE_NAME overrides it) when the environment
 * asks for it; undefined otherwise (the libraries' spans are then no-ops, and no trace header is sent).
 */
export function startTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env): Tracing | undefined {
  const kind = traceExporterFromEnv(env);
  if (!kind) return undefined;
  const exporter: SpanExporter = kind === 'console' ? new ConsoleSpanExporter() : new OTLPTraceExporter();
  const detected = detectResources({ detectors: [envDetector, processDetector, hostDetector] });
  const resource = resourceFromAttributes({ 'service.name': env['OTEL_SERVICE_NAME']?.trim() || serviceName, 'service.namespace': 'triad' }).merge(detected);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  provider.register({ propagator: new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }) });
  const unregister = registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });
  return {
    shutdown: async () => {
      unregister();
      await provider.shutdown();
      propagation.disable();
    },
  };
}
