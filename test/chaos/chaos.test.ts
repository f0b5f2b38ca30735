// A short chaos run in `npm test` (300 tasks over 45 s of faults): nothing lost, no effect applied or
// undone twice, nothing left behind by an undo, every task within its bound. `npm run chaos` runs it longer.
import { afterAll, expect, it } from 'vitest';
import { withTeardown } from '../harness/index.js';
import { ChaosOptionsSchema } from './options.js';
import { runChaos } from './runner.js';

const td = withTeardown(afterAll);

it('a short chaos run: lost, duplicate_effects, orphan_effects and unbounded are all 0', async () => {
  const seed = process.env['CHAOS_SEED'];
  const options = ChaosOptionsSchema.parse({ tasks: 300, minutes: 0.75, ...(seed ? { seed } : {}) });
  const report = await runChaos(options, { teardown: td });
  const summary = JSON.stringify(report);
  // Every accepted task was checked, and faults of each family really happened.
  expect(report.tasks, summary).toBeGreaterThan(0);
  expect(report.faults['restart_nats'], summary).toBe(1);
  expect(report.faults['restart_redis'], summary).toBe(1);
  expect(report.faults['cancel'] ?? 0, summary).toBeGreaterThan(0);
  // Orders waited for approval and were signalled (decision 0019): some signals reached a waiting step or were kept for it.
  expect((report.signals.outcomes['delivered'] ?? 0) + (report.signals.outcomes['buffered'] ?? 0), summary).toBeGreaterThan(0);
  expect(
    { lost: report.lost, duplicate_effects: report.duplicate_effects, orphan_effects: report.orphan_effects, unbounded: report.unbounded },
    `chaos verdict (replay with CHAOS_SEED=${report.seed} or npm run chaos -- --seed ${report.seed}): ${summary}`,
  ).toEqual({ lost: 0, duplicate_effects: 0, orphan_effects: 0, unbounded: 0 });
}, 300_000);
