/**
 * The plan: the compact form of a pinned definition that a task carries in Redis and the Lua
 * transitions interpret (which steps exist, their kinds, agents, budgets, dependencies and failure
 * ladders). A plain agent step compiles to exactly the object it always did (decision 0019 §1.8): the
 * kind fields are added only where a step uses them.
 */
import { DEFAULT_MAX_ITEMS, DEFAULT_MAX_PARALLEL, LadderSchema, type Ladder, type StepDefinition, type WorkflowDefinition } from '@triad/protocol';
import { ladderWorstCaseMs } from './bounds.js';
import { compilePredicate, type PlanPredicate } from './predicate.js';
import { valueReference } from './references.js';

/** A phase's ladder as the Lua reads it: [retries, longBackoffMs, maxFailures, maxCircuitOpen]. */
export type PlanLadder = [number, number, number, number];

export interface PlanStep {
  /** name */
  n: string;
  /** kind: absent = an agent call, 's' sleep, 'w' waitFor, 'c' child */
  k?: 's' | 'w' | 'c';
  /** agent (agent calls only: the Lua reads it only for them) */
  a?: string;
  /** complete-by budget, ms (agent calls) */
  b?: number;
  /** dependsOn */
  d: string[];
  /** needs: the steps whose outputs the request carries */
  nd: string[];
  /** the supervisor's failure ladder (agent calls) */
  l?: PlanLadder;
  /** give up this long after the first start, across attempts and parks (ms; agent calls) */
  g?: number;
  /** the step's compensation, if it has one: agent, budget, ladder, give-up */
  c?: { a: string; b: number; l: PlanLadder; g: number };
  /** when: the condition, compiled */
  w?: PlanPredicate;
  /** sleep: a fixed time, or the input path of the wake time (epoch ms) and the most it may be ahead */
  sl?: { ms: number } | { p: string[]; mx: number };
  /** waitFor: the signal's name and the timeout */
  ws?: { s: string; t: number };
  /** forEach: where the list is ('' = the input, else a step), its path, maxItems, maxParallel */
  fe?: { s: string; p: string[]; m: number; x: number };
  /** child: workflow, pinned version, where its input is (no p and s '' = the whole input), timeout */
  ch?: { w: string; v?: number; s: string; p?: string[]; t?: number };
}

const DEFAULT_LADDER = LadderSchema.parse({});

function planLadder(l: Ladder): PlanLadder {
  return [l.retries, l.longBackoffMs, l.maxFailures, l.maxCircuitOpen];
}

export function compilePlan(def: WorkflowDefinition): PlanStep[] {
  return def.steps.map((s) => {
    const step = s.agent !== undefined ? agentStep(def, s, s.agent) : otherStep(s);
    if (s.when) step.w = compilePredicate(s.when);
    if (s.forEach !== undefined) {
      const ref = valueReference(s.forEach);
      const m = s.maxItems ?? DEFAULT_MAX_ITEMS;
      step.fe = { s: ref.step, p: ref.path, m, x: s.maxParallel ?? Math.min(DEFAULT_MAX_PARALLEL, m) };
    }
    return step;
  });
}

/** An agent call: the object it always was (the key order too, so its JSON is byte-identical). */
function agentStep(def: WorkflowDefinition, s: StepDefinition, agent: string): PlanStep {
  const ladder = s.ladder ?? def.defaults.ladder ?? DEFAULT_LADDER;
  const step: PlanStep = {
    n: s.name,
    a: agent,
    b: s.budgetMs,
    d: [...s.dependsOn],
    nd: [...s.needs],
    l: planLadder(ladder),
    g: s.giveUpAfterMs ?? ladderWorstCaseMs(s.budgetMs, ladder),
  };
  if (s.compensate) {
    const cl = s.compensate.ladder ?? ladder;
    step.c = { a: s.compensate.agent, b: s.compensate.budgetMs, l: planLadder(cl), g: s.compensate.giveUpAfterMs ?? ladderWorstCaseMs(s.compensate.budgetMs, cl) };
  }
  return step;
}

/** A sleep, a wait or a child step: no agent, budget or ladder of its own. */
function otherStep(s: StepDefinition): PlanStep {
  const step: PlanStep = { n: s.name, d: [...s.dependsOn], nd: [...s.needs] };
  if (s.sleep) {
    step.k = 's';
    step.sl = 'ms' in s.sleep ? { ms: s.sleep.ms } : { p: s.sleep.untilInput.split('.'), mx: s.sleep.maxMs };
  } else if (s.waitFor) {
    step.k = 'w';
    step.ws = { s: s.waitFor.signal, t: s.waitFor.timeoutMs };
  } else if (s.child) {
    step.k = 'c';
    const ch: NonNullable<PlanStep['ch']> = { w: s.child.workflow, s: '' };
    if (s.child.version !== undefined) ch.v = s.child.version;
    if (s.child.input !== undefined) {
      const ref = valueReference(s.child.input);
      ch.s = ref.step;
      if (ref.path.length > 0) ch.p = ref.path;
    }
    if (s.child.timeoutMs !== undefined) ch.t = s.child.timeoutMs;
    step.ch = ch;
  }
  return step;
}

/**
 * The idempotency key of a step: stable across attempts, distinct per namespace, task, step and kind.
 * "/" separates the parts because no namespace, task id or step name may contain it, so no two
 * (task, step, kind) share a key (task ids may contain ":"). A fan-out element's is its step's with its
 * index (`…/<step>/<i>`, `…/<step>/<i>/compensate`; decision 0019 §4): digits are never "compensate",
 * so elements, steps and kinds never share one.
 */
export function idempotencyKey(namespace: string, taskId: string, step: string, kind: 'run' | 'compensate', item?: number): string {
  const base = item === undefined ? `${namespace}/${taskId}/${step}` : `${namespace}/${taskId}/${step}/${item}`;
  return kind === 'run' ? base : `${base}/compensate`;
}
