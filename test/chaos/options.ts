// The chaos run's options: `--tasks N --minutes M [--seed S] [--cancel-rate R] [--json]`, validated with zod.
import { parseArgs } from 'node:util';
import { z } from 'zod';

export const ChaosOptionsSchema = z
  .object({
    tasks: z.coerce.number({ error: '--tasks must be a number' }).int('--tasks must be a whole number').min(1, '--tasks must be at least 1').max(1_000_000).default(200),
    minutes: z.coerce.number({ error: '--minutes must be a number' }).positive('--minutes must be more than 0').max(24 * 60).default(1),
    /** Seeds every random choice; CHAOS_SEED, else one is drawn (and printed). */
    seed: z.coerce.number({ error: '--seed (or CHAOS_SEED) must be a number' }).int('--seed (or CHAOS_SEED) must be a whole number').min(0).max(2 ** 31 - 1).optional(),
    /** The share of tasks the run cancels while they run. */
    cancelRate: z.coerce.number({ error: '--cancel-rate must be a number' }).min(0, '--cancel-rate must be from 0 to 1').max(1, '--cancel-rate must be from 0 to 1').default(0.2),
    json: z.boolean().default(false),
  })
  .strict();
export type ChaosOptions = z.output<typeof ChaosOptionsSchema>;
export type ChaosOptionsInput = z.input<typeof ChaosOptionsSchema>;

export const USAGE = 'usage: npm run chaos -- --tasks N --minutes M [--seed S] [--cancel-rate 0..1] [--json]   (CHAOS_SEED also sets the seed)';

/** Parses argv (without node and the script) and the environment; throws with what was wrong and the usage. */
export function parseChaosArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ChaosOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        tasks: { type: 'string' },
        minutes: { type: 'string' },
        seed: { type: 'string' },
        'cancel-rate': { type: 'string' },
        json: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n${USAGE}`, { cause: e });
  }
  const seed = values['seed'] ?? (env['CHAOS_SEED'] || undefined);
  const parsed = ChaosOptionsSchema.safeParse({
    tasks: values['tasks'],
    minutes: values['minutes'],
    seed,
    cancelRate: values['cancel-rate'],
    json: values['json'],
  });
  if (!parsed.success) throw new Error(`invalid chaos options: ${parsed.error.issues.map((i) => i.message).join('; ')}\n${USAGE}`);
  return parsed.data;
}
