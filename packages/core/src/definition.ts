/**
 * Semantic validation of workflow definitions: every problem is listed at once (unknown dependency,
 * cycle, needs outside the ancestors, duplicate names, missing agent), so an author fixes them in one go.
 */
import {
  ErrorCode,
  LadderSchema,
  RetryPolicySchema,
  TriadError,
  validate,
  WorkflowDefinitionSchema,
  type WorkflowDefinition,
  type StepDefinition,
} from '@triad/protocol';

export interface ValidateOptions {
  /** When given, a step (or compensation) whose agent is not in this set is a problem. */
  knownAgents?: ReadonlySet<string>;
}

/** Parses and checks a definition; throws TriadError INVALID_DEFINITION with every problem in `details`. */
export function validateDefinition(raw: unknown, options: ValidateOptions = {}): WorkflowDefinition {
  const shape = validate(raw, WorkflowDefinitionSchema, 'workflow definition');
  // The graph is checked even when the shape is wrong, on what can be read of it, so the author sees
  // an unknown dependency or a cycle together with a bad budget, not one after the other.
  const problems = shape.ok ? definitionProblems(shape.value, options) : [...shape.error.details, ...definitionProblems(looseGraph(raw), options)];
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

/** What can be read of the step graph of a document that failed the shape check. */
function looseGraph(raw: unknown): WorkflowDefinition {
  const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const rawSteps = (raw as { steps?: unknown } | null)?.steps;
  const steps = (Array.isArray(rawSteps) ? rawSteps : [])
    .filter((s): s is Record<string, unknown> => typeof s === 'object' && s !== null && typeof (s as { name?: unknown }).name === 'string')
    .map((s) => {
      const step: WorkflowDefinition['steps'][number] = {
        name: s['name'] as string,
        agent: typeof s['agent'] === 'string' ? s['agent'] : '',
        budgetMs: 1,
        dependsOn: strings(s['dependsOn']),
        needs: strings(s['needs']),
      };
      // Policies that parse on their own are checked for their cross-field problems too.
      const retry = RetryPolicySchema.safeParse(s['retry']);
      if (retry.success) step.retry = retry.data;
      const ladder = LadderSchema.safeParse(s['ladder']);
      if (ladder.success) step.ladder = ladder.data;
      return step;
    });
  return { name: '', steps, onFailure: 'error', defaults: {} };
}

export function definitionProblems(def: WorkflowDefinition, options: ValidateOptions = {}): string[] {
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
    if (options.knownAgents && step.agent !== '') {
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
