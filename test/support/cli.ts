// The command line of the test tools (npm run chaos, fuzz, conformance): node's parseArgs (strict) reads
// the flags, a zod schema checks their values, an error names the --flag, the value given and what is
// allowed, --help prints the usage; and the main() around a run: bad options exit 2, and the run's
// Teardown runs however the run ends.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { z } from 'zod';
import { Teardown } from '../harness/index.js';

export interface CliSpec<S extends z.ZodType> {
  /** Names the tool in its messages: `chaos: --tasks "x": must be a number`. */
  name: string;
  /** What --help prints; its first line, the synopsis, also follows an error. */
  usage: string;
  /**
   * parseArgs' options for every flag but --help (-h), which every tool has. A flag's value goes to
   * the schema key that is its camelCase name (--cancel-rate → cancelRate), so an issue at that key
   * is reported against the flag.
   */
  flags: NonNullable<ParseArgsConfig['options']>;
  /** Checks the flags' values (strings, true for a boolean given, undefined when not given). */
  schema: S;
  /** An environment variable that stands in for a flag not given (schema key → variable); empty counts as unset. */
  env?: Readonly<Partial<Record<keyof z.input<S> & string, string>>>;
}

/** The parsed command line: --help, or the options the schema made of the flags. */
export type CliArgs<T> = { help: true } | { help: false; options: T };

/** A bad command line: the message says which flag, what was given, what is allowed, and to see --help. */
export class CliError extends Error {
  override name = 'CliError';
}

const HELP = { type: 'boolean', short: 'h' } as const;
const SEE_HELP = ' (see --help)';

const camelCase = (flag: string): string => flag.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * zod's messages for what a flag's value most often gets wrong, in the words of a command line
 * ("must be a number", not "expected number, received NaN"); messages a schema gives win over these.
 */
const flagMessages: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      if (issue.expected === 'number') return 'must be a number';
      if (issue.expected === 'int') return 'must be a whole number';
      return undefined;
    case 'too_small':
      if (issue.origin !== 'number') return undefined;
      return issue.inclusive ? `must be at least ${String(issue.minimum)}` : `must be more than ${String(issue.minimum)}`;
    case 'too_big':
      if (issue.origin !== 'number') return undefined;
      return issue.inclusive ? `must be at most ${String(issue.maximum)}` : `must be less than ${String(issue.maximum)}`;
    default:
      return undefined;
  }
};

/** Why parseArgs refused argv, with the known flags when it met an unknown one (node names only the unknown). */
function argvProblem(spec: CliSpec<z.ZodType>, argv: readonly string[], e: unknown): string {
  const code = (e as { code?: unknown }).code;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const { tokens } = parseArgs({ args: [...argv], options: { ...spec.flags, help: HELP }, strict: false, allowPositionals: true, tokens: true });
    const unknown = tokens.find((t) => t.kind === 'option' && !(t.name in spec.flags) && t.name !== 'help');
    if (unknown?.kind === 'option') {
      const known = [...Object.keys(spec.flags), 'help'].map((f) => `--${f}`).join(', ');
      return `unknown option ${unknown.rawName}; the options are ${known}`;
    }
  }
  return (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ');
}

/**
 * Parses argv (without node and the script) and the environment. Returns --help, or the options the
 * schema made; throws a CliError naming each flag that was wrong, what it was given and what it may be.
 */
export function parseCli<S extends z.ZodType>(spec: CliSpec<S>, argv: readonly string[], env: NodeJS.ProcessEnv = process.env): CliArgs<z.output<S>> {
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options: { ...spec.flags, help: HELP }, strict: true, allowPositionals: false }));
  } catch (e) {
    throw new CliError(`${argvProblem(spec, argv, e)}${SEE_HELP}`, { cause: e });
  }
  if (values['help'] === true) return { help: true };

  const envOf = spec.env as Readonly<Record<string, string | undefined>> | undefined;
  const flagOf = new Map<string, string>();
  const input: Record<string, unknown> = {};
  for (const flag of Object.keys(spec.flags)) {
    const key = camelCase(flag);
    const variable = envOf?.[key];
    flagOf.set(key, variable === undefined ? `--${flag}` : `--${flag} (or ${variable})`);
    input[key] = values[flag] ?? (variable === undefined ? undefined : env[variable] || undefined);
  }
  const parsed = spec.schema.safeParse(input, { error: flagMessages });
  if (parsed.success) return { help: false, options: parsed.data };

  const problems = parsed.error.issues.map((issue) => {
    const key = issue.path[0];
    const flag = typeof key === 'string' ? flagOf.get(key) : undefined;
    if (flag === undefined) return issue.message;
    const given = input[key as string];
    const value = typeof given === 'string' || Array.isArray(given) ? ` ${JSON.stringify(given)}` : '';
    return `${flag}${value}: ${issue.message}`;
  });
  throw new CliError(`${problems.join('; ')}${SEE_HELP}`);
}

/** Where a tool's main() reads its command line and writes its messages; the process's by default. */
export interface CliIo {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  out: (text: string) => void;
  err: (text: string) => void;
}

const processIo = (): CliIo => ({
  argv: process.argv.slice(2),
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
});

/**
 * A tool's main(): --help prints the usage (exit code 0); a bad command line prints the error and the
 * synopsis to stderr (2); otherwise `run` gets the options and a Teardown, which is run after it however
 * it ends (a failing step is reported, not thrown). Returns the exit code, for process.exitCode.
 */
export async function runCli<S extends z.ZodType>(
  spec: CliSpec<S>,
  run: (options: z.output<S>, teardown: Teardown) => Promise<number>,
  io: Partial<CliIo> = {},
): Promise<number> {
  const { argv, env, out, err } = { ...processIo(), ...io };
  let args: CliArgs<z.output<S>>;
  try {
    args = parseCli(spec, argv, env);
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    err(`${spec.name}: ${e.message}\n${spec.usage.split('\n')[0]}`);
    return 2;
  }
  if (args.help) {
    out(spec.usage);
    return 0;
  }
  const teardown = new Teardown();
  try {
    return await run(args.options, teardown);
  } finally {
    await teardown.run().catch((e: unknown) => err(`${spec.name}: ${e instanceof Error ? e.message : String(e)}`));
  }
}
