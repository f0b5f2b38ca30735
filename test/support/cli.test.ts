// The test tools' command line: each wrong flag is named with its value and what it may be, --help
// skips the checks, and main() exits 2 on bad options without running, 0 on --help, and tears down.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CliError, parseCli, runCli, type CliSpec } from './cli.js';

const Schema = z
  .object({
    count: z.coerce.number().int().min(1).max(100).default(10),
    pairCount: z.coerce.number().int().refine((n) => n % 2 === 0, 'must be even').default(2),
    minMs: z.coerce.number().int().default(0),
    maxMs: z.coerce.number().int().default(1_000),
    seed: z.coerce.number().int().optional(),
    name: z.string().min(1),
    json: z.boolean().default(false),
  })
  .strict()
  .refine((o) => o.minMs <= o.maxMs, { path: ['maxMs'], message: 'must not be less than --min-ms' });

const SPEC: CliSpec<typeof Schema> = {
  name: 'tool',
  usage: 'usage: npm run tool -- --name N [--count N] [--pair-count N] [--json]\n  --count N  how many (default 10)',
  flags: {
    count: { type: 'string' },
    'pair-count': { type: 'string' },
    'min-ms': { type: 'string' },
    'max-ms': { type: 'string' },
    seed: { type: 'string' },
    name: { type: 'string' },
    json: { type: 'boolean' },
  },
  schema: Schema,
  env: { seed: 'TOOL_SEED' },
};

/** The CliError message parseCli throws for argv. */
function problem(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    parseCli(SPEC, argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(CliError);
    return (e as Error).message;
  }
  throw new Error(`parseCli accepted ${argv.join(' ')}`);
}

describe('parseCli', () => {
  it('maps kebab-case flags to the schema keys, with defaults and the environment', () => {
    expect(parseCli(SPEC, ['--name', 'a', '--pair-count', '4', '--json'], { TOOL_SEED: '7' })).toEqual({
      help: false,
      options: { count: 10, pairCount: 4, minMs: 0, maxMs: 1_000, seed: 7, name: 'a', json: true },
    });
    // The flag wins over its variable; an empty variable is unset.
    expect(parseCli(SPEC, ['--name', 'a', '--seed', '1'], { TOOL_SEED: '7' })).toMatchObject({ options: { seed: 1 } });
    expect(parseCli(SPEC, ['--name', 'a'], { TOOL_SEED: '' })).toMatchObject({ options: { seed: undefined } });
  });

  it('names a bad number with its flag, its value and what is allowed', () => {
    expect(problem(['--name', 'a', '--count', 'x'])).toBe('--count "x": must be a number (see --help)');
    expect(problem(['--name', 'a', '--count', '1.5'])).toBe('--count "1.5": must be a whole number (see --help)');
    expect(problem(['--name', 'a', '--count', '0'])).toBe('--count "0": must be at least 1 (see --help)');
    expect(problem(['--name', 'a', '--count', '101'])).toBe('--count "101": must be at most 100 (see --help)');
    expect(problem(['--name', 'a'], { TOOL_SEED: 'abc' })).toBe('--seed (or TOOL_SEED) "abc": must be a number (see --help)');
  });

  it('names every bad flag, and a missing required one', () => {
    expect(problem(['--count', 'x'])).toBe('--count "x": must be a number; --name: is required (see --help)');
  });

  it('maps a refinement back to its flag, on a field or across fields', () => {
    expect(problem(['--name', 'a', '--pair-count', '3'])).toBe('--pair-count "3": must be even (see --help)');
    expect(problem(['--name', 'a', '--min-ms', '5', '--max-ms', '4'])).toBe('--max-ms "4": must not be less than --min-ms (see --help)');
  });

  it('names an unknown flag and lists the known ones', () => {
    expect(problem(['--name', 'a', '--nope'])).toBe(
      'unknown option --nope; the options are --count, --pair-count, --min-ms, --max-ms, --seed, --name, --json, --help (see --help)',
    );
    expect(problem(['-x'])).toMatch(/^unknown option -x; /);
  });

  it("passes on parseArgs' own complaints", () => {
    expect(problem(['stray'])).toMatch(/^Unexpected argument 'stray'.* \(see --help\)$/);
    expect(problem(['--count'])).toMatch(/--count.*argument missing \(see --help\)$/);
    expect(problem(['--json=yes', '--name', 'a'])).toMatch(/--json.*does not take an argument/);
  });

  it('answers --help (or -h) before checking anything', () => {
    expect(parseCli(SPEC, ['--help'])).toEqual({ help: true });
    expect(parseCli(SPEC, ['-h', '--count', 'x'])).toEqual({ help: true });
  });
});

describe('runCli', () => {
  function io(argv: string[]): { out: string[]; err: string[]; io: Parameters<typeof runCli>[2] } {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { argv, env: {}, out: (t) => out.push(t), err: (t) => err.push(t) } };
  }

  it('prints a bad option and the synopsis to stderr and exits 2 without running', async () => {
    const t = io(['--count', 'x', '--name', 'a']);
    let ran = false;
    const code = await runCli(SPEC, () => ((ran = true), Promise.resolve(0)), t.io);
    expect({ code, ran, out: t.out }).toEqual({ code: 2, ran: false, out: [] });
    expect(t.err).toEqual(['tool: --count "x": must be a number (see --help)\nusage: npm run tool -- --name N [--count N] [--pair-count N] [--json]']);
  });

  it('prints the whole usage to stdout for --help and exits 0', async () => {
    const t = io(['--help']);
    expect(await runCli(SPEC, () => Promise.resolve(1), t.io)).toBe(0);
    expect(t.out).toEqual([SPEC.usage]);
    expect(t.err).toEqual([]);
  });

  it("runs with the options, returns the run's exit code and runs the teardown, also when the run throws", async () => {
    const t = io(['--name', 'a', '--count', '3']);
    const steps: string[] = [];
    const code = await runCli(
      SPEC,
      (o, td) => {
        td.add(() => void steps.push('torn down'));
        steps.push(`ran with count ${o.count}`);
        return Promise.resolve(1);
      },
      t.io,
    );
    expect({ code, steps }).toEqual({ code: 1, steps: ['ran with count 3', 'torn down'] });

    const failing = io(['--name', 'a']);
    const run = runCli(
      SPEC,
      (_, td) => {
        td.add(() => Promise.reject(new Error('port still open')));
        return Promise.reject(new Error('the run broke'));
      },
      failing.io,
    );
    await expect(run).rejects.toThrow('the run broke');
    expect(failing.err).toEqual([expect.stringMatching(/^tool: teardown: 1 of 1 step\(s\) failed: port still open$/)]);
  });
});
