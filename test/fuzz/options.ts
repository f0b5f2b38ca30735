/** The fuzz CLI's options: `--messages N`, `--concurrency N`, `--settle-ms N`, `--json`. */
import { z } from 'zod';
import type { CliSpec } from '../support/cli.js';

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
  })
  .strict();
export type CliOptions = z.output<typeof OptionsSchema>;

export const FUZZ_CLI: CliSpec<typeof OptionsSchema> = {
  name: 'fuzz',
  usage: USAGE,
  flags: {
    messages: { type: 'string' },
    concurrency: { type: 'string' },
    'settle-ms': { type: 'string' },
    json: { type: 'boolean' },
  },
  schema: OptionsSchema,
};
