/**
 * The HTTP surface of a Triad process (TRIAD_HTTP_PORT): GET /metrics (Prometheus text, the triad_*
 * metrics and the process metrics), GET /healthz (the process is alive) and GET /readyz (its
 * connections are up and it serves: 200, or 503 with a JSON reason). Fastify; decision 0013.
 */
import { fastify, type FastifyInstance } from 'fastify';
import { collectDefaultMetrics } from 'prom-client';
import { z } from 'zod';
import { metricsRegistry } from '@triad/telemetry';

/** A named readiness check ("nats", "redis", "serving"): true when that part is ready. */
export type ReadinessChecks = Record<string, () => boolean>;

export interface Readiness {
  ready: boolean;
  /** Why not, when not ready (e.g. "nats: not connected"). */
  reason?: string;
  checks: Record<string, boolean>;
}

export interface HttpSurfaceOptions {
  port: number;
  host?: string;
  /** The process's readiness now. */
  readiness: () => Readiness;
  /** Labels added to every process metric (the namespace). */
  labels?: Record<string, string>;
}

export interface HttpSurface {
  /** The port it listens on (the one chosen when port 0 was asked for). */
  readonly port: number;
  close(): Promise<void>;
}

const PortSchema = z.coerce
  .number({ error: 'TRIAD_HTTP_PORT must be a port number' })
  .int('TRIAD_HTTP_PORT must be a whole number')
  .min(0, 'TRIAD_HTTP_PORT must be 0 to 65535')
  .max(65535, 'TRIAD_HTTP_PORT must be 0 to 65535');

/**
 * TRIAD_HTTP_PORT (and TRIAD_HTTP_HOST, default 0.0.0.0) from the environment: undefined when unset
 * (no HTTP surface), 0 for any free port. A bad value is refused with what to set.
 */
export function httpSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): { port: number; host: string } | undefined {
  const raw = env['TRIAD_HTTP_PORT']?.trim();
  if (!raw) return undefined;
  const parsed = PortSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`${parsed.error.issues[0]?.message ?? 'invalid TRIAD_HTTP_PORT'} (got "${raw}"): set it to the port to serve /metrics, /healthz and /readyz on, or unset it`);
  return { port: parsed.data, host: env['TRIAD_HTTP_HOST']?.trim() || '0.0.0.0' };
}

/** Readiness from named checks: ready when every one passes, else the reason names the ones that fail. */
export function readinessOf(checks: ReadinessChecks, state: 'starting' | 'running' | 'stopping'): Readiness {
  const results: Record<string, boolean> = {};
  for (const [name, check] of Object.entries(checks)) {
    try {
      results[name] = check();
    } catch {
      results[name] = false;
    }
  }
  if (state !== 'running') return { ready: false, reason: state === 'starting' ? 'starting: not serving yet' : 'stopping', checks: results };
  const failing = Object.entries(results).filter(([, ok]) => !ok).map(([name]) => name);
  return failing.length === 0 ? { ready: true, checks: results } : { ready: false, reason: `not ready: ${failing.map((f) => `${f} is down`).join(', ')}`, checks: results };
}

let defaultMetricsOn = false;

/** Starts the HTTP surface; resolves once it listens. */
export async function serveHttp(o: HttpSurfaceOptions): Promise<HttpSurface> {
  if (!defaultMetricsOn) {
    // Process metrics (CPU, memory, event-loop lag, GC), once per process, prefixed like the rest.
    collectDefaultMetrics({ register: metricsRegistry, prefix: 'triad_', ...(o.labels ? { labels: o.labels } : {}) });
    defaultMetricsOn = true;
  }
  const app: FastifyInstance = fastify({ logger: false });
  app.get('/metrics', async (_req, reply) => {
    const text = await metricsRegistry.metrics();
    return reply.header('content-type', metricsRegistry.contentType).send(text);
  });
  app.get('/healthz', (_req, reply) => reply.send({ alive: true, pid: process.pid, uptimeSeconds: Math.round(process.uptime()) }));
  app.get('/readyz', (_req, reply) => {
    const r = o.readiness();
    return reply.code(r.ready ? 200 : 503).send(r);
  });
  try {
    await app.listen({ port: o.port, host: o.host ?? '0.0.0.0' });
  } catch (e) {
    await app.close().catch(() => undefined);
    throw new Error(`cannot serve HTTP on ${o.host ?? '0.0.0.0'}:${o.port} (${e instanceof Error ? e.message : String(e)}): choose another TRIAD_HTTP_PORT`, { cause: e });
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : o.port;
  return { port, close: () => app.close() };
}
