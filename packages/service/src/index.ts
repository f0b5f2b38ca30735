/**
 * @triad/service — the shell every Triad process runs in: validated configuration, a pino logger
 * (whose lines carry the active trace_id and span_id), a health heartbeat file for container health
 * checks, the HTTP surface (TRIAD_HTTP_PORT: /metrics, /healthz, /readyz), the OpenTelemetry SDK from
 * the OTEL_* variables, and a graceful shutdown on SIGINT/SIGTERM.
 */
import { utimes, writeFile } from 'node:fs/promises';
import { trace } from '@opentelemetry/api';
import { pino, destination } from 'pino';
import { errorMessage } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';
import { loadConfig, type Config } from '@triad/settings';
import { httpSettingsFromEnv, readinessOf, serveHttp, type ReadinessChecks } from './http.js';
import { startTracing } from './tracing.js';

export { httpSettingsFromEnv, readinessOf, serveHttp, type HttpSurface, type HttpSurfaceOptions, type Readiness, type ReadinessChecks } from './http.js';
export { startTracing, traceExporterFromEnv, type Tracing } from './tracing.js';

/** The active span's ids on every log line, so a log line leads to its trace (and back). */
function traceIds(): Record<string, string> {
  const sc = trace.getActiveSpan()?.spanContext();
  return sc && trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}

export function createLogger(name: string, level: Config['logLevel'] = 'info'): Logger & { level: string } {
  return pino({ name, level, base: { pid: process.pid }, mixin: traceIds }, destination({ sync: false }));
}

export interface ServiceContext {
  config: Config;
  log: Logger;
  /** Registers a cleanup to run at shutdown (in reverse order). */
  onShutdown: (fn: () => Promise<void> | void) => void;
  /**
   * Sets the health probe: named checks (`{ nats: …, redis: … }`, each true when that part is up), or
   * one function. The heartbeat file is only touched while every check passes, and GET /readyz answers
   * 503 naming the ones that fail.
   */
  healthy: (probe: (() => boolean) | ReadinessChecks) => void;
  /**
   * Ends the service for a reason it cannot recover from (e.g. Redis refused the credentials after
   * start-up): prints it, runs the cleanups and exits 1.
   */
  fail: (e: unknown) => void;
}

/**
 * Runs a service: `start` sets it up; the process then lives until SIGINT/SIGTERM, when every cleanup
 * runs. A failure to start prints the reason and exits 1.
 */
export function runService(name: string, start: (ctx: ServiceContext) => Promise<void>): void {
  let config: Config;
  try {
    config = loadConfig();
  } catch (e) {
    process.stderr.write(`${name}: ${errorMessage(e)}\n`);
    process.exit(1);
  }
  let http: ReturnType<typeof httpSettingsFromEnv>;
  let tracing: ReturnType<typeof startTracing>;
  try {
    http = httpSettingsFromEnv();
    tracing = startTracing(`triad-${name}`);
  } catch (e) {
    process.stderr.write(`${name}: ${errorMessage(e)}\n`);
    process.exit(1);
  }
  const log = createLogger(name, config.logLevel);
  const cleanups: (() => Promise<void> | void)[] = [];
  if (tracing) cleanups.push(() => tracing.shutdown());
  let checks: ReadinessChecks = {};
  let state: 'starting' | 'running' | 'stopping' = 'starting';
  const probe = (): boolean => readinessOf(checks, 'running').ready;
  const healthFile = process.env['TRIAD_HEALTH_FILE'];
  let heartbeat: NodeJS.Timeout | undefined;
  let stopping = false;

  const shutdown = async (signal: string, exitCode = 0): Promise<void> => {
    if (stopping) process.exit(1);
    stopping = true;
    state = 'stopping';
    log.info({ signal }, `${name} stopping`);
    if (heartbeat) clearInterval(heartbeat);
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (e) {
        log.warn({ err: errorMessage(e) }, 'cleanup failed');
      }
    }
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  const ctx: ServiceContext = {
    config,
    log,
    onShutdown: (fn) => cleanups.push(fn),
    healthy: (p) => (checks = typeof p === 'function' ? { serving: p } : p),
    fail: (e) => {
      process.stderr.write(`${name} failed: ${errorMessage(e)}\n`);
      void shutdown('failure', 1);
    },
  };
  // Up before start: /healthz answers while the process connects, and /readyz says it is starting.
  const surface = http
    ? serveHttp({ ...http, readiness: () => readinessOf(checks, state), labels: { namespace: config.namespace } }).then((s) => {
        cleanups.unshift(() => s.close()); // closed last, after the actors stopped
        log.info({ port: s.port }, `${name} serving /metrics, /healthz and /readyz on port ${s.port}`);
        return s;
      })
    : Promise.resolve(undefined);
  Promise.all([start(ctx), surface]).then(
    () => {
      state = 'running';
      if (healthFile) {
        const beat = async (): Promise<void> => {
          if (!probe()) return;
          const now = new Date();
          await utimes(healthFile, now, now).catch(() => writeFile(healthFile, String(process.pid)));
        };
        void beat();
        heartbeat = setInterval(() => void beat(), 5_000);
        heartbeat.unref();
      }
      // The line test harnesses, the benchmark and the local runner wait for: printed whatever the level.
      if (log.level === 'debug' || log.level === 'info') log.info({ namespace: config.namespace }, `${name} ready`);
      else process.stdout.write(`${name} ready (namespace ${config.namespace})\n`);
    },
    (e: unknown) => {
      process.stderr.write(`${name} failed to start: ${errorMessage(e)}\n`);
      process.exit(1);
    },
  );
}
