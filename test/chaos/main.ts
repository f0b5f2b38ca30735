// `npm run chaos -- --tasks N --minutes M [--seed S] [--cancel-rate R] [--json]`: runs the chaos run
// (runner.ts says what it does and checks), prints its verdict as the LAST line, one JSON object, and
// exits 0 only when lost, duplicate_effects, orphan_effects and unbounded are all 0.
import { runCli } from '../support/cli.js';
import { CHAOS_CLI } from './options.js';
import { runChaos, type ChaosReport } from './runner.js';

function summary(r: ChaosReport): string[] {
  return [
    `seed ${r.seed}: ${r.tasks} tasks accepted (${r.not_accepted} not accepted), ${r.terminal} terminal ${JSON.stringify(r.status)}`,
    `lost ${r.lost}, duplicate_effects ${r.duplicate_effects}, orphan_effects ${r.orphan_effects}, unbounded ${r.unbounded} (bound ${r.bound_ms} ms + ${r.allowance_ms} ms), wrong_undos ${r.wrong_undos}`,
    `faults ${JSON.stringify(r.faults)}; max recovery ${r.max_recovery_ms ?? 'n/a'} ms ${JSON.stringify(r.recovery_ms)}`,
    ...Object.entries(r.examples).filter(([, list]) => list.length > 0).map(([kind, list]) => `${kind}: ${list.join(' | ')}`),
    r.ok ? 'chaos: PASS' : 'chaos: FAIL',
  ];
}

process.exitCode = await runCli(CHAOS_CLI, async (options, teardown) => {
  let report: ChaosReport;
  try {
    report = await runChaos(options, { teardown, progress: (line) => process.stderr.write(`${line}\n`) });
  } catch (e) {
    process.stderr.write(`chaos: the run itself failed, so nothing was checked: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    return 2;
  }
  if (!options.json) for (const line of summary(report)) process.stdout.write(`${line}\n`);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  return report.ok ? 0 : 1;
});
