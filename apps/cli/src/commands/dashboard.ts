/** `triad dashboard`: serves the web dashboard (tasks, a task's DAG and events, alerts, dead letters, workflows, the cluster). */
import type { Command } from 'commander';
import { errorMessage, type Logger } from '@triad/protocol';
import { startDashboard } from '../dashboard/server.js';
import { intArg } from '../io.js';
import { action, connectionOptions, err, examples, optionsOf, out, withClient } from '../runtime.js';

export function register(program: Command): void {
  const cmd = program
    .command('dashboard')
    .description('serve the web dashboard: tasks live, a task\'s steps and events, alerts, dead letters, workflows, the cluster; cancel and retry as an operator')
    .option('--port <port>', 'HTTP port (default 8080; 0 picks a free one)', intArg(0, 65_535))
    .option('--host <host>', 'address to listen on (default 127.0.0.1: only this machine; the dashboard acts with this NATS identity)');
  connectionOptions(cmd);
  examples(cmd, ['triad dashboard', 'triad dashboard --port 9000 --client-id ops']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const o = optionsOf<{ port?: number; host?: string }>(self);
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
        const me = await server.app.inject('/api/identity').then((r) => r.json<{ canAct: boolean; why?: string }>());
        out(`dashboard at ${server.url} (namespace ${client.namespace}, identity ${client.clientId}; ${me.canAct ? 'operator: actions enabled' : `read-only: ${me.why ?? ''}`})`);
        await new Promise<void>((resolve) => {
          const stop = (): void => resolve();
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
        await server.close();
        return 0;
      });
    }),
  );
}
