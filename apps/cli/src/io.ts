/**
 * Input and output: JSON from flags, files or stdin, the argument parsers commander calls, and the
 * writers that keep stdout clean. Every input problem is a `CliError` with exit code 2 (a usage/input
 * error) that says how to fix it. Light on purpose (no zod, no NATS): every command loads it to parse
 * its arguments, and only a command that runs loads the client (runtime.ts).
 */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';
import { TASK_STATUSES as STATUSES, type TaskStatus } from '@triad/protocol/constants';

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The exit codes: 0 success, 1 operational failure, 2 usage or input error, 130 interrupted. */
export const ExitCode = { Ok: 0, Failure: 1, Usage: 2, Interrupted: 130 } as const;

/** An expected error: printed as `triad: <message>` plus indented details, never with a stack. */
export class CliError extends Error {
  override name = 'CliError';
  readonly exitCode: number;
  readonly details: readonly string[];
  constructor(message: string, o: { exitCode?: number; details?: readonly string[]; cause?: unknown } = {}) {
    super(message, o.cause === undefined ? undefined : { cause: o.cause });
    this.exitCode = o.exitCode ?? ExitCode.Failure;
    this.details = o.details ?? [];
  }
}

/** A usage/input error (exit code 2). */
export function usageError(message: string, details: readonly string[] = []): CliError {
  return new CliError(message, { exitCode: ExitCode.Usage, details });
}

export const INPUT_EXAMPLE = `--input '{"orderId":"o1","amount":42}'`;

/** Parses JSON text; `source` names where it came from ("--input", "file orders.json"). */
export function parseJson(text: string, source: string, example: string = INPUT_EXAMPLE): unknown {
  if (text.trim() === '') throw usageError(`${source} is empty; expected JSON`, [`example: ${example}`]);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw usageError(`${source} is not valid JSON: ${errorMessage(e)}`, [`example: ${example}`]);
  }
}

/** Reads a whole file ("-" is stdin) as UTF-8; a missing or unreadable file is a usage error. */
export function readText(path: string, what: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : code === 'EACCES' ? 'permission denied' : errorMessage(e);
    throw usageError(`cannot read ${what} ${path === '-' ? '(stdin)' : path}: ${why}`);
  }
}

/** Reads and parses a JSON file ("-" is stdin). */
export function readJsonFile(path: string, what: string, example?: string): unknown {
  return parseJson(readText(path, what), `${what} ${path === '-' ? '(stdin)' : path}`, example);
}

/**
 * A task's input from `--input <json>` or `--input-file <path>` (not both); `{}` when neither is
 * given.
 */
export function taskInput(o: { input?: string | undefined; inputFile?: string | undefined }, read: (path: string) => string = (p) => readText(p, '--input-file')): unknown {
  if (o.input !== undefined && o.inputFile !== undefined) {
    throw usageError('give the input either with --input or with --input-file, not both');
  }
  if (o.input !== undefined) return parseJson(o.input, '--input');
  if (o.inputFile !== undefined) return parseJson(read(o.inputFile), `--input-file ${o.inputFile === '-' ? '(stdin)' : o.inputFile}`);
  return {};
}

/** A commander argument parser for whole numbers in a range (e.g. `--limit`, `--timeout`, `--version`). */
export function intArg(min: number, max: number = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value: string): number => {
    const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`;
      throw new InvalidArgumentError(`Expected a whole number ${range}, got "${value}".`);
    }
    return n;
  };
}

export const TASK_STATUSES: readonly TaskStatus[] = STATUSES;

/** Validates `--status` against the task statuses, listing the allowed values when it is not one. */
export function parseStatus(value: string): TaskStatus {
  const status = TASK_STATUSES.find((s) => s === value);
  if (status === undefined) {
    throw new InvalidArgumentError(`"${value}" is not a task status; use one of: ${TASK_STATUSES.join(', ')}.`);
  }
  return status;
}

export function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

export function err(line: string): void {
  process.stderr.write(`${line}\n`);
}

export function printJson(value: unknown, pretty = true): void {
  out(pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value));
}
