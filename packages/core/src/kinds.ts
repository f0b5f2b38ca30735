/**
 * Kinds of step (decision 0019 §1): what a step does — an agent call, a sleep, a wait for a signal, a
 * child task — and the features it uses (when, forEach…), with the rules that keep one step one kind,
 * and the features a scheduler refuses until it can run them (§10).
 */
import {
  DEFAULT_MAX_ITEMS,
  OutputPathSchema,
  PathSchema,
  SleepSchema,
  type StepDefinition,
  type WorkflowDefinition,
} from '@triad/protocol';
import type { z } from 'zod';

export const STEP_KINDS = ['agent', 'sleep', 'waitFor', 'child'] as const;
export type StepKindName = (typeof STEP_KINDS)[number];

/** What a step does; a step without a kind field counts as an agent call (validation refuses it). */
export function stepKind(step: Pick<StepDefinition, 'sleep' | 'waitFor' | 'child'>): StepKindName {
  if (step.sleep !== undefined) return 'sleep';
  if (step.waitFor !== undefined) return 'waitFor';
  if (step.child !== undefined) return 'child';
  return 'agent';
}

/**
 * Everything a definition can use beyond plain agent calls, by the field that says so. A scheduler
 * announces the ones it runs (discovery metadata `features`) and refuses to register a definition that
 * uses another (decision 0019 §1.5, §10).
 */
export const STEP_FEATURES = ['when', 'sleep', 'waitFor', 'forEach', 'child'] as const;
export type StepFeature = (typeof STEP_FEATURES)[number];

/** Each step's features, in step order. */
export function stepFeatures(def: WorkflowDefinition): { step: string; feature: StepFeature }[] {
  return def.steps.flatMap((s) => STEP_FEATURES.filter((f) => s[f] !== undefined).map((feature) => ({ step: s.name, feature })));
}

/** `step "x" uses sleep, which this scheduler does not support yet`, for every feature outside `supported`. */
export function unsupportedFeatures(def: WorkflowDefinition, supported: ReadonlySet<string>): string[] {
  return stepFeatures(def)
    .filter((f) => !supported.has(f.feature))
    .map((f) => `step "${f.step}" uses ${f.feature}, which this scheduler does not support yet`);
}

const KIND_TEXT: Record<Exclude<StepKindName, 'agent'>, string> = { sleep: 'sleeps', waitFor: 'waits for a signal', child: 'starts a child task' };

/** Agent-only fields, and why each does not apply to the other kinds. */
const AGENT_ONLY: Record<string, (kind: Exclude<StepKindName, 'agent'>) => string> = {
  budgetMs: () => 'only an agent call has a complete-by budget',
  retry: () => 'only an agent call is retried',
  ladder: () => "only an agent call climbs the supervisor's failure ladder",
  giveUpAfterMs: (k) => (k === 'sleep' ? 'a sleep ends at its time' : 'its timeoutMs bounds it'),
  compensate: (k) => (k === 'sleep' ? 'a sleep has no effect to undo' : k === 'waitFor' ? 'a wait has no effect to undo' : "a child task is undone by its own workflow's compensations"),
  needs: () => "only an agent's request carries outputs; a condition or a child input reads them directly",
};

const listed = (xs: readonly string[]): string => (xs.length <= 1 ? (xs[0] ?? '') : `${xs.slice(0, -1).join(', ')} and ${xs[xs.length - 1]}`);

/**
 * The one-kind rules of a step (decision 0019 §1.5). `raw` is the step as written: it tells a field the
 * author set from one zod filled in with its default (budgetMs), so only the raw document can say that
 * a sleep should not have one.
 */
export function kindProblems(step: Record<string, unknown>, name: string, raw: boolean): string[] {
  const has = (k: string): boolean => step[k] !== undefined;
  const problems: string[] = [];
  const kinds = Object.keys(step).filter((k) => (STEP_KINDS as readonly string[]).includes(k) && has(k));
  if (kinds.length !== 1) {
    problems.push(
      `step "${name}" must do one thing: call an agent ("agent"), sleep ("sleep"), wait for a signal ("waitFor") or start a child task ("child"); it has ${kinds.length === 0 ? 'none' : listed(kinds)}`,
    );
  }
  if (has('forEach') && !has('agent')) problems.push(`step "${name}": forEach runs an agent once per element: add "agent"`);
  if ((has('maxItems') || has('maxParallel')) && !has('forEach')) problems.push(`step "${name}": maxParallel and maxItems apply only with forEach`);
  const maxItems = step['maxItems'];
  const maxParallel = step['maxParallel'];
  if (has('forEach') && typeof maxParallel === 'number' && maxParallel > (typeof maxItems === 'number' ? maxItems : DEFAULT_MAX_ITEMS)) {
    problems.push(`step "${name}": maxParallel (${maxParallel}) is above maxItems (${typeof maxItems === 'number' ? maxItems : `${DEFAULT_MAX_ITEMS}, the default`})`);
  }
  const kind = kinds.length === 1 ? (kinds[0] as StepKindName) : undefined;
  if (kind !== undefined && kind !== 'agent') {
    for (const [field, why] of Object.entries(AGENT_ONLY)) {
      const v = step[field];
      const set = field === 'needs' ? Array.isArray(v) && v.length > 0 : field === 'budgetMs' ? raw && v !== undefined : v !== undefined;
      if (set) problems.push(`step "${name}" ${KIND_TEXT[kind]}: "${field}" does not apply to it (${why(kind)}); remove it`);
    }
  }
  return problems;
}

type Shaped = 'sleep' | 'forEach' | 'child.input';

/**
 * The problems of the fields whose zod shape is a union (sleep, forEach, child.input), one message each
 * instead of zod's "Invalid input", and which fields they are about (their zod issues are replaced).
 */
export function unionFieldProblems(step: Record<string, unknown>, name: string): { problems: string[]; fields: Shaped[] } {
  const problems: string[] = [];
  const fields: Shaped[] = [];
  const add = (field: Shaped, messages: string[]): void => {
    if (messages.length === 0) return;
    problems.push(...messages);
    fields.push(field);
  };
  if (step['sleep'] !== undefined) add('sleep', sleepProblems(step['sleep'], name));
  if (step['forEach'] !== undefined) add('forEach', valueRefProblems(step['forEach'], name, 'forEach'));
  const child = step['child'];
  if (typeof child === 'object' && child !== null && (child as Record<string, unknown>)['input'] !== undefined) {
    add('child.input', valueRefProblems((child as Record<string, unknown>)['input'], name, 'child.input'));
  }
  return { problems, fields };
}

function sleepProblems(v: unknown, name: string): string[] {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return [`step "${name}": sleep must be { "ms": <ms> } or { "untilInput": "<path>", "maxMs"?: <ms> }`];
  const s = v as Record<string, unknown>;
  if ((s['ms'] !== undefined) === (s['untilInput'] !== undefined)) return [`step "${name}": sleep takes either ms or untilInput`];
  const option = s['ms'] !== undefined ? SleepSchema.options[0] : SleepSchema.options[1];
  return issues(option.safeParse(v), name, 'sleep');
}

function valueRefProblems(v: unknown, name: string, what: string): string[] {
  const path = (x: unknown, field: string): string[] =>
    PathSchema.safeParse(x).success ? [] : [`step "${name}": ${field} ${JSON.stringify(x)} is not a path: 1-8 segments separated by "." (e.g. "items", "order.items")`];
  if (typeof v === 'string') return path(v, what);
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
    if (keys.length === 1 && keys[0] === 'input') return path((v as { input: unknown }).input, `${what}.input`);
    if (keys.length === 1 && keys[0] === 'output') {
      const out = (v as { output: unknown }).output;
      return OutputPathSchema.safeParse(out).success ? [] : [`step "${name}": ${what}.output ${JSON.stringify(out)} is not an output reference: "<step>" or "<step>.<path>" (e.g. "quote.items")`];
    }
  }
  return [`step "${name}": ${what} must be a path ("items"), { "input": "<path>" } or { "output": "<step>.<path>" }`];
}

function issues(r: z.ZodSafeParseResult<unknown>, name: string, field: string): string[] {
  if (r.success) return [];
  // Duration messages name their field already ("sleep.ms must be at least 1 ms").
  return r.error.issues.map((i) => (i.message.startsWith(`${field}.`) ? `step "${name}": ${i.message}` : `step "${name}": ${field}${i.path.length > 0 ? `.${i.path.join('.')}` : ''}: ${i.message}`));
}

/** A child step's reference to another workflow (pinned version or latest). */
export function childReferences(def: WorkflowDefinition): { step: string; workflow: string; version?: number }[] {
  return def.steps.flatMap((s) => (s.child ? [{ step: s.name, workflow: s.child.workflow, ...(s.child.version !== undefined ? { version: s.child.version } : {}) }] : []));
}

/** The most child workflows childResolver looks up (a chain or a tree of them). */
export const MAX_CHILD_LOOKUPS = 50;

/**
 * The workflows a definition's child steps start, looked up (transitively, at most MAX_CHILD_LOOKUPS)
 * with `get`, as the resolver `taskBound` takes: undefined for one that is not registered.
 */
export async function childResolver(
  def: WorkflowDefinition,
  get: (name: string, version?: number) => Promise<WorkflowDefinition | undefined>,
): Promise<(name: string, version?: number) => WorkflowDefinition | undefined> {
  const found = new Map<string, WorkflowDefinition | undefined>();
  const key = (name: string, version?: number): string => `${name}@${version ?? 'latest'}`;
  const queue = childReferences(def);
  for (let next = queue.shift(); next !== undefined && found.size < MAX_CHILD_LOOKUPS; next = queue.shift()) {
    const k = key(next.workflow, next.version);
    if (found.has(k)) continue;
    const child = await get(next.workflow, next.version);
    found.set(k, child);
    if (child) queue.push(...childReferences(child));
  }
  return (name, version) => found.get(key(name, version));
}
