/**
 * @triad/service — the shell every Triad process runs in: validated configuration, a pino logger, a
 * health heartbeat file for container health checks, and a graceful shutdown on SIGINT/SIGTERM.
 */
import { utimes, writeFile } from 'node:fs/promises';
import { pino, destination } from 'pino';
import { errorMessage, loadConfig, type Config, type Logger } from '@triad/protocol';

export function createLogger(name: string, level: Config['logLevel'] = 'info'): Logger & { level: string } {
  return pino({ name, level, base: { pid: process.pid } }, destination({ sync: false }));
}

export interface ServiceContext {
  config: Config;
  log: Logger;
  /** Registers a cleanup to run at shutdown (in reverse order). */
  onShutdown: (fn: () => Promise<void> | void) => void;
  /** Sets the health probe: the heartbeat file is only touched while it returns true. */
  healthy: (probe: () => boolean) => void;
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
  const log = createLogger(name, config.logLevel);
  const cleanups: (() => Promise<void> | void)[] = [];
  let probe: () => boolean = () => true;
  const healthFile = process.env['TRIAD_HEALTH_FILE'];
  let heartbeat: NodeJS.Timeout | undefined;
  let stopping = false;

  const shutdown = async (signal: string, exitCode = 0): Promise<void> => {
    if (stopping) process.exit(1);
    stopping = true;
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
    healthy: (p) => (probe = p),
    fail: (e) => {
      process.stderr.write(`${name} failed: ${errorMessage(e)}\n`);
      void shutdown('failure', 1);
    },
  };
  start(ctx).then(
    () => {
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
