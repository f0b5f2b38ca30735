// The chaos run's options: `--tasks N --minutes M [--seed S] [--cancel-rate R] [--json]`, validated with zod.
import { z } from 'zod';
import type { CliSpec } from '../support/cli.js';

export const ChaosOptionsSchema = z
  .object({
    tasks: z.coerce.number().int().min(1).max(1_000_000).default(200),
    minutes: z.coerce.number().positive().max(24 * 60).default(1),
    /** Seeds every random choice; CHAOS_SEED, else one is drawn (and printed). */
    seed: z.coerce.number().int().min(0).max(2 ** 31 - 1).optional(),
    /** The share of tasks the run cancels while they run. */
    cancelRate: z.coerce.number().min(0, 'must be from 0 to 1').max(1, 'must be from 0 to 1').default(0.2),
    /**
     * The limits lane (decision 0020 §9.4): payment limited (`--concurrency 3 --key input.customerId
     * --per-key-concurrency 1`) through the run; the verdict adds its checks (ChaosReport.limits).
     */
    limits: z.boolean().default(false),
    json: z.boolean().default(false),
  })
  .strict();
export type ChaosOptions = z.output<typeof ChaosOptionsSchema>;
export type ChaosOptionsInput = z.input<typeof ChaosOptionsSchema>;

export const USAGE = 'usage: npm run chaos -- --tasks N --minutes M [--seed S] [--cancel-rate 0..1] [--limits] [--json]   (CHAOS_SEED also sets the seed)';

export const CHAOS_CLI: CliSpec<typeof ChaosOptionsSchema> = {
  name: 'chaos',
  usage: USAGE,
  flags: {
    tasks: { type: 'string' },
    minutes: { type: 'string' },
    seed: { type: 'string' },
    'cancel-rate': { type: 'string' },
    limits: { type: 'boolean' },
    json: { type: 'boolean' },
  },
  schema: ChaosOptionsSchema,
  env: { seed: 'CHAOS_SEED' },
};
