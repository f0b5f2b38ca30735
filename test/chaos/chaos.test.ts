// A short chaos run in `npm test` (300 tasks over 45 s of faults): nothing lost, no effect applied or
// undone twice, nothing left behind by an undo. Its seed is fixed (printed; CHAOS_SEED replays another):
// `npm run chaos` draws a new one each run, and a seed that finds something is added to CHAOS_SEEDS. Whether
// every task ended within its bound is a time: `npm run chaos` judges it (unbounded), not this suite on
// two shared cores — here it is reported, not asserted.
import { afterAll, expect, it } from 'vitest';
import { withTeardown } from '../harness/index.js';
import { ChaosOptionsSchema } from './options.js';
import { runChaos } from './runner.js';

const td = withTeardown(afterAll);

/** Seeds `npm test` runs: the first chosen once; add one here when a random `npm run chaos` finds something. */
export const CHAOS_SEEDS = [270_027] as const;

it('a short chaos run with a fixed seed: lost, duplicate_effects and orphan_effects are all 0', async () => {
  const seed = Number(process.env['CHAOS_SEED'] ?? CHAOS_SEEDS[0]);
  console.log(`chaos.test: seed ${seed} (replay with CHAOS_SEED=${seed} npx vitest run test/chaos/chaos.test.ts, or npm run chaos -- --seed ${seed})`);
  const options = ChaosOptionsSchema.parse({ tasks: 300, minutes: 0.75, seed });
  const report = await runChaos(options, { teardown: td });
  const summary = JSON.stringify(report);
  // Every accepted task was checked, and faults of each family really happened.
  expect(report.tasks, summary).toBeGreaterThan(0);
  expect(report.faults['restart_nats'], summary).toBe(1);
  expect(report.faults['restart_redis'], summary).toBe(1);
  expect(report.faults['cancel'] ?? 0, summary).toBeGreaterThan(0);
  // Orders waited for approval and were signalled (decision 0019): some signals reached a waiting step or were kept for it.
  expect((report.signals.outcomes['delivered'] ?? 0) + (report.signals.outcomes['buffered'] ?? 0), summary).toBeGreaterThan(0);
  // Orders with several lines shipped each line under its own key (ship fans out over the reservation's lines).
  expect(report.fan_outs_with_several_elements, summary).toBeGreaterThan(0);
  expect(report.seed).toBe(seed);
  expect({ lost: report.lost, duplicate_effects: report.duplicate_effects, orphan_effects: report.orphan_effects }, `chaos verdict (seed ${report.seed}): ${summary}`).toEqual({
    lost: 0,
    duplicate_effects: 0,
    orphan_effects: 0,
  });
  // The time bound, reported for the record (npm run chaos asserts it).
  console.log(`chaos.test: unbounded ${report.unbounded} (bound ${report.bound_ms} ms + ${report.allowance_ms} ms), max recovery ${report.max_recovery_ms ?? 'n/a'} ms`);
}, 300_000);
