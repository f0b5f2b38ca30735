// Bad input gets a clear error and loses nothing (invariant 5), under a storm: generated msgpack on every
// subject a Triad process consumes, judged by the schemas themselves. FC_SEED reproduces a run.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { StepRequestSchema, SubmissionSchema, SupervisorCommandSchema, encode, names } from '@triad/protocol';
import { withTeardown } from '../harness/index.js';
import { buildCases } from './cases.js';
import { namesChange } from './expectations.js';
import { judge, judgeResults, judgeStepRequests, type Verdict } from './oracle.js';
import { runFuzz } from './run.js';
import { FUZZ_SEEDS, seedFromEnv } from './seed.js';
import { targets, type Target } from './targets.js';

const td = withTeardown(afterAll);
const seed = seedFromEnv(process.env, FUZZ_SEEDS[0]);
console.log(`fuzz seed ${seed} (FC_SEED=${seed} reproduces this run)`);

/** The verdict of a target's own schema on a message (for results: every item valid). */
function verdict(t: Target, bytes: Uint8Array): boolean {
  const ok = (v: Verdict): boolean => v.valid;
  switch (t.kind) {
    case 'submit':
      return ok(judge(bytes, SubmissionSchema, 'submission'));
    case 'step':
      return ok(judge(bytes, StepRequestSchema, 'step request'));
    case 'command':
      return ok(judge(bytes, SupervisorCommandSchema, 'supervisor command'));
    case 'step-batch': {
      const r = judgeStepRequests(bytes);
      return 'items' in r && r.items.every((i) => i.verdict.valid);
    }
    case 'result': {
      const r = judgeResults(bytes);
      return 'items' in r && r.items.every((i) => i.verdict.valid);
    }
    case 'api':
      return ok(judge(bytes, t.schema, t.op));
    case 'api-unknown':
      return true;
  }
}

describe('the fuzzer itself', () => {
  const n = names('fuzzcheck');
  const now = Date.now();
  const limits = { protocol: 1_000_000, transport: 1_004_096 };

  it("every target's samples are valid by its schema (else the schemas moved and the samples must follow)", () => {
    for (const t of targets(n, now)) {
      for (const sample of fc.sample(t.sample, { seed, numRuns: 30 })) {
        expect({ target: t.name, valid: verdict(t, encode(sample)) }).toEqual({ target: t.name, valid: true });
      }
    }
  });

  it('the same seed gives the same messages', () => {
    const build = (): string[] =>
      buildCases({ targets: targets(n, now), seed, messages: 200, now, limits: () => limits, inbox: 'x' }).map((c) => createHash('sha1').update(c.bytes).digest('hex'));
    const first = build();
    expect(first).toHaveLength(200);
    expect(build()).toEqual(first);
  });

  it('a verdict names a change by its path, a child of it, an added key, or the array of a dropped element', () => {
    expect(namesChange(['attempt: Too small'], { kind: 'out-of-range', path: ['attempt'] })).toBe(true);
    expect(namesChange(['retry.maxAttempts: Too small'], { kind: 'empty', path: ['retry'] })).toBe(true);
    expect(namesChange(['(root): Unrecognized key: "fzAb"'], { kind: 'extra-field', path: ['fzAb'] })).toBe(true);
    expect(namesChange(['results: Too small'], { kind: 'drop', path: ['results', 0] })).toBe(true);
    expect(namesChange(['taskId: Invalid input'], { kind: 'retype', path: ['attempt'] })).toBe(false);
    expect(namesChange(['attemptCount: Invalid input'], { kind: 'retype', path: ['attempt'] })).toBe(false);
  });
});

it('storms every consumed subject: no process crashes, every bad message is refused with a reason naming the field, a valid task completes after', async () => {
  // Three huge messages per subject (just under what NATS accepts, over Triad's limit, tens of thousands
  // of fields): the suite shares two cores with other test files; `npm run fuzz` sends all five kinds.
  const summary = await runFuzz(td, { messages: Number(process.env['FUZZ_MESSAGES'] ?? 2_000), hugePerSubject: 3, seed, log: (l) => console.log(l) });
  console.log(JSON.stringify({ ...summary, byTarget: undefined }));
  expect(summary.failures).toEqual([]);
  expect(summary.afterStorm).toBe('completed');
  // The storm reached every kind of outcome, so a check that passed had something to check.
  expect(summary.counts.deadLettersFound).toBeGreaterThan(0);
  expect(summary.counts.consumed).toBeGreaterThan(0);
  expect(summary.counts.apiErrors).toBeGreaterThan(0);
  expect(summary.counts.rejectedEvents).toBeGreaterThan(0);
  expect(summary.counts.tasksAccepted).toBeGreaterThan(0);
}, 180_000);
