/**
 * The commander program: global options, `--version`, error output (`triad: ...`, exit 2 for usage) and
 * commands. Declaring the commands loads only commander and the light modules; each command's action
 * loads what it needs when it runs, so `triad --version` and `--help` start fast.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { commands } from './commands/index.js';
import { ExitCode } from './io.js';
import { connectionOptions } from './options.js';

/** The CLI's version: its package.json's. */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
  return pkg.version ?? 'unknown';
}

export function buildProgram(): Command {
  const program = new Command('triad');
  program
    .description('Triad: submit and follow tasks, inspect their state, and manage workflows.')
    .version(`triad ${cliVersion()}`, '-V, --version', 'print the version and exit')
    // Settings copied to every command created after them.
    .exitOverride()
    .configureOutput({
      outputError: (str, write) => write(`triad: ${str.replace(/^error: /, '')}`),
    })
    .showHelpAfterError('(add --help for usage)')
    .addHelpText(
      'after',
      `
Environment: NATS_URL (default nats://127.0.0.1:4222), TRIAD_NAMESPACE (default "default"); NATS credentials,
one of NATS_CREDS, NATS_NKEY_SEED, NATS_USER with NATS_PASSWORD, or NATS_TOKEN; NATS TLS: NATS_TLS_CA, and
NATS_TLS_CERT with NATS_TLS_KEY for mutual TLS. The --nats-* flags override them.
Exit codes: 0 ok, 1 failure (or a task that did not complete), 2 usage or input error, 130 interrupted.

Example:
  $ triad submit orders --input '{"orderId":"o1","amount":42}' --wait
`,
    );
  connectionOptions(program);
  for (const c of commands) c.register(program);
  return program;
}

/** Runs the CLI with `argv` (process.argv form) and returns the exit code. */
export async function run(argv: readonly string[] = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
  } catch (e) {
    if (e instanceof CommanderError) {
      // Commander has printed the message (or the help) already.
      if (e.exitCode === 0) return ExitCode.Ok;
      return ExitCode.Usage;
    }
    const { reportError } = await import('./errors.js');
    return reportError(e);
  }
  return typeof process.exitCode === 'number' ? process.exitCode : ExitCode.Ok;
}
