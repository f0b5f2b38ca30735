/**
 * The seeds `npm test`'s fuzz test runs, fixed so it proves the same thing every time; `npm run fuzz` draws
 * a new seed each run, and one that finds something is added here.
 */
export const FUZZ_SEEDS = [270_027] as const;

/** The run's seed: FC_SEED from the environment when set (to reproduce a run), else `fallback`, else a fresh one. */
import { z } from 'zod';

const SeedSchema = z.coerce.number().int().min(-(2 ** 31)).max(2 ** 31 - 1);

export function seedFromEnv(env: NodeJS.ProcessEnv = process.env, fallback?: number): number {
  const raw = env['FC_SEED'];
  if (raw === undefined || raw === '') return fallback ?? Math.floor(Math.random() * 2 ** 31);
  const parsed = SeedSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`FC_SEED must be a 32-bit integer (it seeds fast-check), got ${JSON.stringify(raw)}`);
  return parsed.data;
}
