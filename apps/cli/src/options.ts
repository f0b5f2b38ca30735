/**
 * How a command is declared: the connection options every command accepts, examples in --help, options
 * merged with the program's, and the action wrapper that turns a result or an error into the exit code.
 * Light on purpose (commander only): `triad --help`, `--version` and a usage error load nothing else, and
 * a command's action loads what it needs when it runs (runtime.ts for the client).
 */
import type { Command } from 'commander';
import { ExitCode, intArg } from './io.js';

/** The options every command accepts (on the program and on each command, so they work anywhere). */
export interface ConnectionOptions {
  nats?: string;
  natsCreds?: string;
  natsNkeySeed?: string;
  natsUser?: string;
  natsPassword?: string;
  natsToken?: string;
  natsTlsCa?: string;
  natsTlsCert?: string;
  natsTlsKey?: string;
  namespace?: string;
  clientId?: string;
  requestTimeout?: number;
}

/**
 * Adds the connection options. They are declared on the program and on every leaf command, because
 * commander hands everything after a command's own first option to that command.
 */
export function connectionOptions(cmd: Command): Command {
  return cmd
    .option('--nats <url>', 'NATS server URL, or several comma-separated (overrides NATS_URL; default nats://127.0.0.1:4222)')
    .option('--nats-creds <file>', 'NATS credentials file: user JWT and nkey seed (overrides NATS_CREDS)')
    .option('--nats-nkey-seed <file>', 'file holding a NATS user nkey seed (overrides NATS_NKEY_SEED)')
    .option('--nats-user <user>', 'NATS user; its password from --nats-password or NATS_PASSWORD (overrides NATS_USER)')
    .option('--nats-password <password>', 'NATS password (overrides NATS_PASSWORD; better set NATS_PASSWORD: a flag shows in the process list)')
    .option('--nats-token <token>', 'NATS token (overrides NATS_TOKEN; better set NATS_TOKEN: a flag shows in the process list)')
    .option('--nats-tls-ca <file>', 'PEM file of the CA that signed the NATS server certificate (overrides NATS_TLS_CA)')
    .option('--nats-tls-cert <file>', 'PEM client certificate for mutual TLS, with --nats-tls-key (overrides NATS_TLS_CERT)')
    .option('--nats-tls-key <file>', 'PEM private key of --nats-tls-cert (overrides NATS_TLS_KEY)')
    .option('--namespace <ns>', 'Triad namespace (overrides TRIAD_NAMESPACE; default "default")')
    .option('--client-id <id>', 'the client identity to submit and read under (overrides TRIAD_CLIENT_ID; default "default")')
    .option('--request-timeout <ms>', 'timeout of connecting to NATS and of each API request (default 10000)', intArg(1));
}

/** Adds "Example(s):" lines to a command's --help. */
export function examples(cmd: Command, lines: readonly string[]): Command {
  return cmd.addHelpText('after', `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`);
}

/** A command's options merged with its ancestors' (an option may have been parsed by any of them). */
export function optionsOf<T>(cmd: Command): T {
  return cmd.optsWithGlobals<Record<string, unknown>>() as T;
}

/**
 * Wraps a command's action: its returned number (or 0) becomes the exit code; an error is reported on
 * stderr with its exit code (the reporter is loaded only then).
 */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<number | void>): (...args: A) => Promise<void> {
  return async (...args: A): Promise<void> => {
    try {
      const code = await fn(...args);
      process.exitCode = code ?? ExitCode.Ok;
    } catch (e) {
      const { reportError } = await import('./errors.js');
      process.exitCode = reportError(e);
    }
  };
}
