// Model-based test of the task/step state machine (issue #10, item 3): random operation sequences —
// submissions (and duplicate ones), results (current, stale, duplicate, for attempts never started, on
// another agent type's subject), expiries, task deadlines, leader takeovers and deposed writes, operator
// retries and cancels, lost dispatches — run against the real Lua transitions on a real redis-server and
// against a pure model written from decisions 0009 and 0010; after every operation the states must agree
// and the invariants hold; then a calm phase must end every task.
// The seed is fixed (MODEL_SEEDS, printed below); FC_SEED=<seed> runs another; FC_RUNS sets the number of runs.
import { describe, it } from 'vitest';
import fc from 'fast-check';
import { ADMISSION_OP_ARBS, OP_ARBS, type Op } from './ops.js';
import { applicable, execute, newEnv, type Env } from './runner.js';
import { calm } from './calm.js';
import { REGRESSIONS, type Regression } from './regressions.js';
import { compAgent, runAgent } from './plans.js';
import { coverageReport } from './coverage.js';
import { usePrivateRedis } from '../redis-server.js';

const r = usePrivateRedis('triad-model-test');

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name}=${raw} is not an integer; unset it or give a whole number`);
  return n;
}

/**
 * The seeds `npm test` runs, fixed so a run proves the same thing every time (printed; FC_SEED replays
 * another). A seed that finds a bug — here, or in a run with FC_SEED set to a fresh value — is added
 * to this list, and its counterexample to regressions.ts once fixed.
 */
const MODEL_SEEDS = [270_027];
const SEED = intFromEnv('FC_SEED', MODEL_SEEDS[0] as number);
// About 5 s alone on this machine (100 runs of up to 50 operations, each checked on a real redis-server).
const RUNS = intFromEnv('FC_RUNS', 100);
const MAX_COMMANDS = intFromEnv('FC_MAX_COMMANDS', 50);

let nsCounter = 0;
function ns(): string {
  nsCounter++;
  return `m${process.pid}-${nsCounter}`;
}

/** One operation as a fast-check command; the "model" and the "real" side both live in the Env. */
class OpCommand implements fc.AsyncCommand<Env, Env> {
  constructor(readonly op: Op) {}
  check(env: Readonly<Env>): boolean {
    return applicable(env, this.op);
  }
  async run(env: Env): Promise<void> {
    await execute(env, this.op);
  }
  toString(): string {
    return JSON.stringify(this.op);
  }
}

const admissionArbs = ADMISSION_OP_ARBS.flatMap(([arb, weight]) => Array.from({ length: weight }, () => arb.map((op) => new OpCommand(op))));
const ADMISSION_RUNS = intFromEnv('FC_ADMISSION_RUNS', 60);

const commandArbs = OP_ARBS.flatMap(([arb, weight]) => Array.from({ length: weight }, () => arb.map((op) => new OpCommand(op))));

/** A regression: its operations as written, its own checks of the store, then the calm phase. */
async function replay(reg: Regression): Promise<void> {
  const env = await newEnv(r(), ns());
  for (const op of reg.ops) await execute(env, op);
  const problems = reg.expect ? await reg.expect(env) : [];
  if (problems.length > 0) throw new Error(`regression "${reg.name}": after its operations\n  - ${problems.join('\n  - ')}\n  operations:\n    ${env.log.join('\n    ')}`);
  await calm(env);
}

describe('the task/step state machine against a model of decisions 0009 and 0010', () => {
  it(`random operation sequences agree with the model and keep the invariants (FC_SEED=${SEED} FC_RUNS=${RUNS})`, async () => {
    console.log(`model-based test: FC_SEED=${SEED} FC_RUNS=${RUNS} FC_MAX_COMMANDS=${MAX_COMMANDS}`);
    const started = performance.now();
    const details = await fc.check(
      // Half the runs limit step b's run, step a's compensation and the fan-out ship's elements, run and
      // compensation (decision 0020): those phases wait queued
      // for a grant (the `grant` operation) instead of starting.
      fc.asyncProperty(fc.boolean(), fc.commands(commandArbs, { maxCommands: MAX_COMMANDS, size: 'max' }), async (limited, cmds) => {
        const env = await newEnv(r(), ns(), limited ? [runAgent('b'), compAgent('a'), runAgent('ship'), compAgent('ship')] : []);
        await fc.asyncModelRun(() => ({ model: env, real: env }), cmds);
        await calm(env);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    if (details.failed) {
      throw new Error(
        `${fc.defaultReportMessage(details)}\n\nReproduce: FC_SEED=${SEED} FC_RUNS=${RUNS} FC_MAX_COMMANDS=${MAX_COMMANDS} npx vitest run packages/store/test/model\n` +
          'Keep it: add the Counterexample (its JSON list of operations) to packages/store/test/model/regressions.ts once the model or the store is fixed.',
        { cause: details.errorInstance },
      );
    }
    console.log(`model-based test: ${RUNS} runs in ${Math.round(performance.now() - started)} ms`);
    if (process.env['FC_STATS'] === '1') console.log(`what the runs exercised (transitions, states after them):\n${coverageReport()}`);
  }, 300_000);

  it(`with admission (decision 0024): random operation sequences agree with the model (FC_SEED=${SEED} FC_RUNS=${ADMISSION_RUNS})`, async () => {
    // Each client's active tasks capped at one per bucket, and every submitted task in one bucket: a client's
    // later tasks wait for admission, and are started by the `admit` operation (scheduler or leader) or a sweep.
    const details = await fc.check(
      // No dispatch limits here (the runs above cover them; a limited compensation that reports a retryable
      // failure shows a known mismatch of its \`reported\` flag, reported with issue #28's admission work).
      fc.asyncProperty(fc.commands(admissionArbs, { maxCommands: MAX_COMMANDS, size: 'max' }), async (cmds) => {
        const env = await newEnv(r(), ns(), [], true);
        await fc.asyncModelRun(() => ({ model: env, real: env }), cmds);
        await calm(env);
      }),
      { seed: SEED, numRuns: ADMISSION_RUNS },
    );
    if (details.failed) {
      throw new Error(`${fc.defaultReportMessage(details)}\n\nReproduce: FC_SEED=${SEED} FC_ADMISSION_RUNS=${ADMISSION_RUNS} FC_MAX_COMMANDS=${MAX_COMMANDS} npx vitest run packages/store/test/model`, { cause: details.errorInstance });
    }
  }, 300_000);

  for (const reg of REGRESSIONS) {
    it(`regression: ${reg.name}`, () => replay(reg));
  }
});
