/**
 * Semantic validation of workflow definitions: every problem is listed at once (unknown dependency,
 * cycle, needs outside the ancestors, duplicate names, missing agent, one kind per step, references to
 * outputs a step cannot see), so an author fixes them in one go.
 */
import {
  ChildSchema,
  ErrorCode,
  LadderSchema,
  PredicateSchema,
  RetryPolicySchema,
  SleepSchema,
  TriadError,
  validate,
  ValueRefSchema,
  WaitForSchema,
  WorkflowDefinitionSchema,
  type WorkflowDefinition,
  type StepDefinition,
} from '@triad/protocol';
import { kindProblems, unionFieldProblems } from './kinds.js';
import { predicateOutputs, predicateProblems, predicateSizeProblems } from './predicate.js';
import { valueReference } from './references.js';

export interface ValidateOptions {
  /** When given, a step (or compensation) whose agent is not in this set is a problem. */
  knownAgents?: ReadonlySet<string>;
}

/** Parses and checks a definition; throws TriadError INVALID_DEFINITION with every problem in `details`. */
export function validateDefinition(raw: unknown, options: ValidateOptions = {}): WorkflowDefinition {
  const shape = validate(raw, WorkflowDefinitionSchema, 'workflow definition');
  const written = rawStepProblems(raw);
  // zod reports a failed union (a condition, a sleep, a list reference) as one "Invalid input": those
  // issues give way to the per-field messages above.
  const shapeIssues = shape.ok ? [] : shape.error.details.filter((d) => !written.replaced.some((prefix) => d.startsWith(`${prefix}:`) || d.startsWith(`${prefix}.`)));
  // The graph is checked even when the shape is wrong, on what can be read of it, so the author sees
  // an unknown dependency or a cycle together with a bad budget, not one after the other.
  // (A loose graph drops a kind field that does not parse: its one-kind rules come from the raw document.)
  const graph = shape.ok ? definitionProblems(shape.value, options) : graphProblems(looseGraph(raw), options, false);
  const problems = [...new Set([...shapeIssues, ...written.problems, ...graph])];
  if (problems.length > 0) {
    const rawName = (raw as { name?: unknown } | null)?.name;
    const name = shape.ok ? shape.value.name : typeof rawName === 'string' ? rawName : '(unnamed)';
    throw new TriadError(
      ErrorCode.InvalidDefinition,
      `workflow "${name}" is invalid (${problems.length} problem${problems.length === 1 ? '' : 's'}): ${problems.join('; ')}`,
      { details: problems },
    );
  }
  if (!shape.ok) throw new TriadError(ErrorCode.InvalidDefinition, shape.error.message, { details: shape.error.details });
  return shape.value;
}

function rawSteps(raw: unknown): Record<string, unknown>[] {
  const steps = (raw as { steps?: unknown } | null)?.steps;
  return (Array.isArray(steps) ? steps : []).filter((s): s is Record<string, unknown> => typeof s === 'object' && s !== null && !Array.isArray(s));
}

/**
 * The rules only the document as written can check (a field zod filled in with its default, a union
 * that failed), with the zod issue paths their messages replace (`steps.2.when`).
 */
function rawStepProblems(raw: unknown): { problems: string[]; replaced: string[] } {
  const problems: string[] = [];
  const replaced: string[] = [];
  const steps = (raw as { steps?: unknown } | null)?.steps;
  if (!Array.isArray(steps)) return { problems, replaced };
  steps.forEach((s: unknown, i) => {
    if (typeof s !== 'object' || s === null || Array.isArray(s)) return;
    const step = s as Record<string, unknown>;
    const name = typeof step['name'] === 'string' ? step['name'] : `steps[${i}]`;
    problems.push(...kindProblems(step, name, true));
    if (step['when'] !== undefined) {
      const when = predicateProblems(step['when'], name);
      problems.push(...when);
      if (when.length > 0) replaced.push(`steps.${i}.when`);
    }
    const unions = unionFieldProblems(step, name);
    problems.push(...unions.problems);
    replaced.push(...unions.fields.map((f) => `steps.${i}.${f}`));
  });
  return { problems, replaced };
}

/** What can be read of the step graph of a document that failed the shape check. */
function looseGraph(raw: unknown): WorkflowDefinition {
  const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const steps = rawSteps(raw)
    .filter((s) => typeof s['name'] === 'string')
    .map((s) => {
      const step: WorkflowDefinition['steps'][number] = {
        name: s['name'] as string,
        budgetMs: 1,
        dependsOn: strings(s['dependsOn']),
        needs: strings(s['needs']),
      };
      if (typeof s['agent'] === 'string') step.agent = s['agent'];
      // Policies and kinds that parse on their own are checked for their cross-field problems too.
      const retry = RetryPolicySchema.safeParse(s['retry']);
      if (retry.success) step.retry = retry.data;
      const ladder = LadderSchema.safeParse(s['ladder']);
      if (ladder.success) step.ladder = ladder.data;
      const when = PredicateSchema.safeParse(s['when']);
      if (when.success) step.when = when.data;
      const sleep = SleepSchema.safeParse(s['sleep']);
      if (sleep.success) step.sleep = sleep.data;
      const waitFor = WaitForSchema.safeParse(s['waitFor']);
      if (waitFor.success) step.waitFor = waitFor.data;
      const child = ChildSchema.safeParse(s['child']);
      if (child.success) step.child = child.data;
      const forEach = ValueRefSchema.safeParse(s['forEach']);
      if (forEach.success) step.forEach = forEach.data;
      if (typeof s['maxItems'] === 'number') step.maxItems = s['maxItems'];
      if (typeof s['maxParallel'] === 'number') step.maxParallel = s['maxParallel'];
      return step;
    });
  const name = (raw as { name?: unknown } | null)?.name;
  return { name: typeof name === 'string' ? name : '', steps, onFailure: 'error', defaults: {} };
}

export function definitionProblems(def: WorkflowDefinition, options: ValidateOptions = {}): string[] {
  return graphProblems(def, options, true);
}

function graphProblems(def: WorkflowDefinition, options: ValidateOptions, kindRules: boolean): string[] {
  const problems: string[] = [];
  const byName = new Map<string, StepDefinition>();
  for (const step of def.steps) {
    if (byName.has(step.name)) problems.push(`step "${step.name}" is defined more than once`);
    byName.set(step.name, step);
  }
  for (const step of def.steps) {
    for (const dep of step.dependsOn) {
      if (dep === step.name) problems.push(`step "${step.name}" depends on itself`);
      else if (!byName.has(dep)) problems.push(`step "${step.name}" depends on unknown step "${dep}"`);
    }
    if (kindRules) problems.push(...kindProblems(step, step.name, false));
    if (step.child && step.child.workflow === def.name) {
      problems.push(`step "${step.name}" starts workflow "${def.name}", which is this workflow: a workflow cannot start itself`);
    }
    if (step.when) problems.push(...predicateSizeProblems(step.when, step.name));
    if (options.knownAgents && step.agent !== undefined) {
      if (!options.knownAgents.has(step.agent)) problems.push(`step "${step.name}" uses agent "${step.agent}", which is not known`);
      if (step.compensate && !options.knownAgents.has(step.compensate.agent)) {
        problems.push(`compensation of step "${step.name}" uses agent "${step.compensate.agent}", which is not known`);
      }
    }
    const retry = step.retry ?? def.defaults.retry;
    if (retry && retry.initialDelayMs > retry.maxDelayMs) {
      problems.push(`step "${step.name}": retry.initialDelayMs (${retry.initialDelayMs}) is above retry.maxDelayMs (${retry.maxDelayMs})`);
    }
    const ladder = step.ladder ?? def.defaults.ladder;
    if (ladder && ladder.retries > ladder.maxFailures) {
      problems.push(`step "${step.name}": ladder.retries (${ladder.retries}) is above ladder.maxFailures (${ladder.maxFailures})`);
    }
  }
  const cycle = findCycle(def.steps, byName);
  if (cycle) problems.push(`dependency cycle: ${cycle.join(' -> ')}`);
  // ancestorsOf terminates on cycles too, so a cycle does not hide the needs problems.
  for (const step of def.steps) {
    const ancestors = ancestorsOf(step.name, byName);
    for (const need of step.needs) {
      if (!byName.has(need)) problems.push(`step "${step.name}" needs unknown step "${need}"`);
      else if (!ancestors.has(need)) {
        problems.push(`step "${step.name}" needs the output of "${need}" but does not depend on it (add it to dependsOn)`);
      }
    }
    // A condition, a list or a child input may read the output of any step the step (transitively)
    // depends on; unlike needs, it is read by the transition, not carried in a request.
    const reads: [string, string][] = [
      ...(step.when ? predicateOutputs(step.when).map((s): [string, string] => ['when', s]) : []),
      ...(step.forEach ? [['forEach', valueReference(step.forEach).step] as [string, string]] : []),
      ...(step.child?.input !== undefined ? [['child.input', valueReference(step.child.input).step] as [string, string]] : []),
    ];
    const seen = new Set<string>();
    for (const [what, from] of reads) {
      if (from === '' || seen.has(`${what}|${from}`)) continue;
      seen.add(`${what}|${from}`);
      if (!byName.has(from)) problems.push(`step "${step.name}": ${what} refers to the output of "${from}", which is not a step`);
      else if (!ancestors.has(from)) problems.push(`step "${step.name}": ${what} refers to the output of "${from}", which it does not depend on (add it to dependsOn)`);
    }
  }
  return problems;
}

function findCycle(steps: readonly StepDefinition[], byName: ReadonlyMap<string, StepDefinition>): string[] | undefined {
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (name: string): string[] | undefined => {
    const s = state.get(name);
    if (s === 'done') return undefined;
    if (s === 'visiting') return [...path.slice(path.indexOf(name)), name];
    state.set(name, 'visiting');
    path.push(name);
    for (const dep of byName.get(name)?.dependsOn ?? []) {
      if (!byName.has(dep) || dep === name) continue;
      const c = visit(dep);
      if (c) return c;
    }
    path.pop();
    state.set(name, 'done');
    return undefined;
  };
  for (const step of steps) {
    const c = visit(step.name);
    if (c) return c.reverse();
  }
  return undefined;
}

function ancestorsOf(name: string, byName: ReadonlyMap<string, StepDefinition>): Set<string> {
  const seen = new Set<string>();
  const stack = [...(byName.get(name)?.dependsOn ?? [])];
  while (stack.length > 0) {
    const n = stack.pop() as string;
    if (seen.has(n)) continue;
    seen.add(n);
    stack.push(...(byName.get(n)?.dependsOn ?? []));
  }
  return seen;
}

/** A canonical JSON form (sorted keys) for comparing definitions when a version is re-registered. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
