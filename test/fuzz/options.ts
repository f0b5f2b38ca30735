/** The fuzz CLI's options: `--messages N`, `--concurrency N`, `--settle-ms N`, `--json`. */
import { parseArgs } from 'node:util';
import { z } from 'zod';

export const USAGE = `usage: npm run fuzz -- [--messages N] [--concurrency N] [--settle-ms N] [--json]
  --messages N     messages in total, spread over every subject a Triad process consumes (default 3000)
  --concurrency N  messages in flight at once (default 32)
  --settle-ms N    how long Triad may take to drain its streams and end accepted tasks (default 120000)
  --json           print only the JSON summary (always the last line of output)
  FC_SEED=<int>    reproduces a run (the seed is printed at the start)
  FUZZ_DEBUG=1     also prints the actors' output`;

const OptionsSchema = z
  .object({
    messages: z.coerce.number().int().min(1).max(10_000_000).default(3_000),
    concurrency: z.coerce.number().int().min(1).max(1_024).default(32),
    settleMs: z.coerce.number().int().min(1_000).default(120_000),
    json: z.boolean().default(false),
    help: z.boolean().default(false),
  })
  .strict();
export type CliOptions = z.output<typeof OptionsSchema>;

/** Parses argv (without node and the script); throws an Error saying what was wrong and showing the usage. */
export function parseOptions(argv: readonly string[]): CliOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        messages: { type: 'string' },
        concurrency: { type: 'string' },
        'settle-ms': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${USAGE}`);
  }
  const { 'settle-ms': settleMs, ...rest } = values;
  const parsed = OptionsSchema.safeParse({ ...rest, settleMs });
  if (!parsed.success) {
    const flag = (key: unknown): string => (key === 'settleMs' ? '--settle-ms' : `--${String(key)}`);
    throw new Error(`${parsed.error.issues.map((i) => `${flag(i.path[0])}: ${i.message}`).join('; ')}\n${USAGE}`);
  }
  return parsed.data;
}
