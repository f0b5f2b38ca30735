/**
 * How an error ends a command: the lines it prints (`triad: <message>` and its details) and the exit code
 * (2 for input, 1 otherwise). Loaded only when a command fails.
 */
import { CommanderError } from 'commander';
import { ErrorCode, TriadError, errorMessage } from '@triad/protocol';
import { CliError, ExitCode, err } from './io.js';

/** TriadError codes that mean the caller's input was wrong (exit 2); every other code exits 1. */
const INPUT_ERROR_CODES: ReadonlySet<string> = new Set([ErrorCode.InvalidMessage, ErrorCode.InvalidDefinition, ErrorCode.InvalidConfig, ErrorCode.PayloadTooLarge]);

/** The exit code for an error. */
export function exitCodeOf(e: unknown): number {
  if (e instanceof CliError) return e.exitCode;
  if (e instanceof CommanderError) return e.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
  if (e instanceof TriadError) return INPUT_ERROR_CODES.has(e.code) ? ExitCode.Usage : ExitCode.Failure;
  return ExitCode.Failure;
}

/**
 * The lines an error prints: `triad: <message>` and each detail indented. When the message already
 * ends with the details joined by "; " (how TriadErrors are built), that tail is not repeated.
 */
export function errorLines(e: unknown): string[] {
  let message = errorMessage(e);
  const details = e instanceof TriadError || e instanceof CliError ? [...e.details] : [];
  if (details.length > 0) {
    const joined = details.join('; ');
    if (message.endsWith(joined) && message.length > joined.length) message = message.slice(0, -joined.length).replace(/[:\s]+$/, ':');
  }
  return [`triad: ${message}`, ...details.map((d) => `  ${d}`)];
}

export function reportError(e: unknown): number {
  for (const line of errorLines(e)) err(line);
  if (process.env['TRIAD_DEBUG'] && e instanceof Error && e.stack) err(e.stack);
  return exitCodeOf(e);
}
