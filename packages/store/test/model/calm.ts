// The calm phase after the random operations: no more faults — every current attempt (a run or a
// compensation) is answered ok, every passed deadline is swept, the clock moves to the next deadline —
// and every task must reach a terminal state within a bound computed from its plan.
import { TERMINAL } from './model.js';
import { answerable, queued } from './ops.js';
import { execute, Mismatch, T0, type Env } from './runner.js';

/** Iterations allowed per phase: a park's end, an expiry, a retry and an answer, with room to spare. */
const PER_PHASE = 10;

export async function calm(env: Env): Promise<void> {
  const model = env.model;
  let phases = 0;
  // A child step: its run and its undo, each an operation that may have to be sent again and a notice.
  for (const t of model.tasks.values()) for (const s of t.spec.steps) phases += s.comp || s.child ? 2 : 1;
  // A fan-out step's elements are phases of their own (decision 0019 §4).
  for (const t of model.tasks.values()) for (const s of t.steps.values()) phases += 2 * (s.elements?.length ?? 0);
  const bound = 20 + PER_PHASE * phases;
  env.log.push('-- calm: no more faults --');
  for (let i = 0; i < bound; i++) {
    if ([...model.tasks.values()].every((t) => TERMINAL.has(t.status))) return;
    // A phase waiting for a dispatch limit gets its grant (the limiter's own behaviour is tested on its own).
    if (queued(env).length > 0) {
      await execute(env, { t: 'grant', pick: 0, late: false, old: false, lag: 0, publish: true });
      continue;
    }
    if (answerable(env).length > 0) {
      await execute(env, { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true });
      continue;
    }
    const deadlines = [...model.expectedDeadlines().values()];
    if (deadlines.some((d) => d <= model.clock)) {
      await execute(env, { t: 'sweep', publish: true });
      continue;
    }
    if (deadlines.length === 0) break;
    await execute(env, { t: 'advance', ms: Math.min(...deadlines) - model.clock });
  }
  const open = [...model.tasks.values()].filter((t) => !TERMINAL.has(t.status)).map((t) => `${t.id} (${t.status})`);
  throw new Mismatch(
    `liveness: without faults, ${open.join(', ')} did not reach a terminal state within ${bound} calm iterations (clock +${model.clock - T0} ms)\n  after the operations:\n    ${env.log.join('\n    ')}`,
  );
}
