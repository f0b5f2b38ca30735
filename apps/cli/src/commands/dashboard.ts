/** `triad dashboard`: serves the web dashboard (tasks, a task's DAG and events, alerts, dead letters, workflows, the cluster). */
import type { Command } from 'commander';
import type { Logger } from '@triad/telemetry';
import type { HttpSurface } from '@triad/service';
import { err, intArg, out } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('dashboard')
    .description('serve the web dashboard: tasks live, a task\'s steps and events, alerts, dead letters, workflows, the cluster; cancel and retry as an operator')
    .option('--port <port>', 'HTTP port (default 8080; 0 picks a free one)', intArg(0, 65_535))
    .option('--host <host>', 'address to listen on (default 127.0.0.1: only this machine; the dashboard acts with this NATS identity)')
    .option('--http-port <port>', "this process's /metrics, /healthz and /readyz (as TRIAD_HTTP_PORT does for the actors; 0 picks a free one)", intArg(0, 65_535));
  connectionOptions(cmd);
  examples(cmd, ['triad dashboard', 'triad dashboard --port 9000 --client-id ops']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const [{ withClient }, { errorMessage }, { httpSettingsFromEnv, readinessOf, serveHttp }, { startDashboard }] = await Promise.all([import('../runtime.js'), import('@triad/protocol'), import('@triad/service'), import('../dashboard/server.js')]);
      const o = optionsOf<{ port?: number; host?: string; httpPort?: number }>(self);
      // Checked before connecting: a bad TRIAD_HTTP_PORT is a usage error, not a half-started dashboard.
      const fromEnv = httpSettingsFromEnv();
      const httpPort = o.httpPort ?? fromEnv?.port;
      return withClient(self, async (client) => {
        const log: Logger = {
          debug: () => undefined,
          info: () => undefined,
          warn: (obj, msg) => err(`triad dashboard: ${msg ?? ''} ${JSON.stringify(obj)}`),
          error: (obj, msg) => err(`triad dashboard: ${msg ?? ''} ${JSON.stringify(obj)}`),
        };
        let server;
        try {
          server = await startDashboard(client, { port: o.port ?? 8080, host: o.host ?? '127.0.0.1', log });
        } catch (e) {
          throw new Error(`the dashboard could not listen on ${o.host ?? '127.0.0.1'}:${o.port ?? 8080} (${errorMessage(e)}): choose another --port`, { cause: e });
        }
        let surface: HttpSurface | undefined;
        if (httpPort !== undefined) {
          const host = o.host ?? fromEnv?.host ?? '127.0.0.1';
          try {
            surface = await serveHttp({ port: httpPort, host, labels: { namespace: client.namespace }, readiness: () => readinessOf({ nats: () => client.bus.isConnected() }, 'running') });
          } catch (e) {
            await server.close();
            throw new Error(`${errorMessage(e)}: choose another --http-port`, { cause: e });
          }
          out(`metrics and health at http://${host}:${surface.port}/metrics, /healthz, /readyz`);
        }
        const me = await server.app.inject({ url: '/api/identity', headers: { host: new URL(server.url).host } }).then((r) => r.json<{ canAct: boolean; why?: string }>());
        out(`dashboard at ${server.url} (namespace ${client.namespace}, identity ${client.clientId}; ${me.canAct ? 'operator: actions enabled' : `read-only: ${me.why ?? ''}`})`);
        await new Promise<void>((resolve) => {
          const stop = (): void => resolve();
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
        await Promise.all([server.close(), surface?.close()]);
        return 0;
      });
    }),
  );
}
