/**
 * `npm run conformance -- --agent-cmd "<command>" [--agent <type>] [--json]`: runs an agent, in any
 * language, through the protocol's cases against a private NATS and says which pass and which fail.
 * Prints a JSON report as the last line; exits 0 when every case passed, 1 when one failed, 2 on bad options.
 */
import { runCli } from '../support/cli.js';
import { CONFORMANCE_CLI } from './options.js';
import { runConformance, type ConformanceReport } from './run.js';

function print(r: ConformanceReport): void {
  console.log(`conformance of agent type ${r.agent} (${r.instances} process(es): ${r.agentCmd}) in ${(r.durationMs / 1000).toFixed(1)} s`);
  for (const c of r.cases) {
    console.log(`${c.ok ? 'PASS' : 'FAIL'} ${c.name}: ${c.title}`);
    for (const p of c.problems) console.log(`     ✗ ${p}`);
    for (const n of c.notes) console.log(`     · ${n}`);
  }
  const failed = r.cases.filter((c) => !c.ok);
  console.log(failed.length === 0 ? `conformance: all ${r.cases.length} cases passed` : `conformance: ${failed.length} of ${r.cases.length} cases failed: ${failed.map((c) => c.name).join(', ')}`);
  if (r.agentOutput) console.log(`the agents' last output:\n${r.agentOutput.join('\n')}`);
}

process.exitCode = await runCli(CONFORMANCE_CLI, async (o, td) => {
  let report: ConformanceReport;
  try {
    report = await runConformance(td, { ...o, log: o.json ? undefined : (l) => console.error(l) });
  } catch (e) {
    if (!o.json) console.error(`conformance: the run could not start: ${(e as Error).message}`);
    console.log(JSON.stringify({ ok: false, error: (e as Error).message }));
    return 1;
  }
  if (!o.json) print(report);
  console.log(JSON.stringify(report));
  return report.ok ? 0 : 1;
});
