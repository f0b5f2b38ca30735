/**
 * `npm run fuzz -- --messages N [--json]`: one fuzz run against a private NATS, Redis and Triad. Prints
 * the seed first and a JSON summary as the last line; exits 1 when a check failed (naming it), 2 on bad options.
 */
import { runCli } from '../support/cli.js';
import { CHECKS, type CheckName } from './checks.js';
import { FUZZ_CLI } from './options.js';
import { runFuzz, type FuzzSummary } from './run.js';
import { seedFromEnv } from './seed.js';

function report(summary: FuzzSummary): void {
  const c = summary.counts;
  console.log(`fuzz: ${summary.messages} messages (${(summary.bytes / 1e6).toFixed(1)} MB) in ${(summary.durationMs / 1000).toFixed(1)} s`);
  console.log(`  by category: ${Object.entries(summary.byCategory).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  console.log(`  dead letters: ${c.deadLettersFound}/${c.deadLettersExpected} expected found (${c.deadLetterRepeats} repeats); consumed without one: ${c.consumed}`);
  console.log(`  API: ${c.apiErrors} error replies, ${c.apiOk} ok; rejected events: ${c.rejectedEvents}; refused by NATS: ${c.refusedByNats}`);
  console.log(`  tasks accepted ${c.tasksAccepted}, ended ${c.tasksEnded}; after the storm: ${summary.afterStorm}`);
  console.log(`  processes: ${summary.processes.map((p) => `${p.name} pid ${p.pid} ${p.running ? 'running' : 'GONE'}`).join(', ')}`);
  console.log(`  retried by redelivery: ${Object.entries(summary.retries).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  for (const [check, count] of Object.entries(summary.failuresByCheck) as [CheckName, number][]) {
    console.log(`FAILED ${check} (${count}): ${CHECKS[check]}`);
    for (const f of summary.failures.filter((x) => x.check === check)) {
      console.log(`  ${f.caseId === undefined ? '' : `case ${f.caseId} ${f.target} (${f.category}): `}${f.detail}`);
    }
  }
  if (summary.ok) console.log('fuzz: every check passed');
}

process.exitCode = await runCli(FUZZ_CLI, async (o, td) => {
  let seed: number;
  try {
    seed = seedFromEnv();
  } catch (e) {
    console.error(`fuzz: ${(e as Error).message}`);
    return 2;
  }
  console.error(`fuzz: seed ${seed} (FC_SEED=${seed} reproduces this run)`);
  let summary: FuzzSummary;
  try {
    summary = await runFuzz(td, { messages: o.messages, seed, concurrency: o.concurrency, settleTimeoutMs: o.settleMs, log: o.json ? undefined : (l) => console.error(l) });
  } catch (e) {
    console.log(JSON.stringify({ ok: false, seed, error: (e as Error).message }));
    return 1;
  }
  if (!o.json) report(summary);
  console.log(JSON.stringify(summary));
  return summary.ok ? 0 : 1;
});
