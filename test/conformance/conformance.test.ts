// The conformance kit passes both agents of the project: the TypeScript agent host (the example's
// inventory agent, which also compensates) and the Go agent of examples/go, written from docs/protocol.md.
import { afterAll, describe, expect, it } from 'vitest';
import { withTeardown } from '../harness/index.js';
import { buildGoExamples } from '../support/go.js';
import { ROOT, SCRIPTS } from '../support/triad.js';
import { runConformance, type ConformanceReport } from './run.js';

const td = withTeardown(afterAll);

function failures(r: ConformanceReport): string[] {
  const failed = r.cases.filter((c) => !c.ok).map((c) => `${c.name}: ${c.problems.join('; ')}`);
  return failed.length > 0 ? [...failed, ...(r.agentOutput ?? [])] : [];
}

describe.concurrent('the conformance kit', () => {
  it('passes the TypeScript agent host', async () => {
    const r = await runConformance(td, {
      agentCmd: `${JSON.stringify(process.execPath)} ${SCRIPTS.orderAgents}`,
      agent: 'inventory',
      serviceEnv: 'INVENTORY_URL',
      instances: 2,
      readyTimeoutMs: 30_000,
      cwd: ROOT,
      // Its breaker would open on the kit's failure cases and refuse the others: out of this run's way.
      env: { ORDERS_AGENTS: 'inventory', ORDERS_REGISTER_WORKFLOW: 'false', TRIAD_BREAKER_THRESHOLD: '1000' },
    });
    expect(failures(r)).toEqual([]);
    expect(r.cases.length).toBeGreaterThanOrEqual(14);
    // It answers probes (a should): the case has no note saying it did not.
    expect(r.cases.find((c) => c.name === 'probe')?.notes).toEqual([]);
  }, 120_000);

  it('passes the Go agent, under another agent type name', async () => {
    const go = await buildGoExamples(td);
    const r = await runConformance(td, {
      agentCmd: `${go.agent} -agent conformance-go`,
      agent: 'conformance-go',
      serviceEnv: 'FRAUD_URL',
      instances: 2,
      readyTimeoutMs: 30_000,
      // Its breaker too: the kit's failure cases (503s, a call outlasting its window) count towards it.
      env: { TRIAD_BREAKER_THRESHOLD: '1000' },
    });
    expect(failures(r)).toEqual([]);
    expect(r.cases.length).toBeGreaterThanOrEqual(14);
    expect(r.cases.find((c) => c.name === 'probe')?.notes).toEqual([]);
  }, 900_000);
});
