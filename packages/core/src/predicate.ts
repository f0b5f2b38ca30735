/**
 * `when` conditions as data (decision 0019 §1.4–1.5, §1.8): the problems of a raw condition, one message
 * each (zod would report a failed union as one "Invalid input"), its size, the outputs it reads, its
 * compiled plan form, and a one-line description for operators.
 */
import {
  MAX_PREDICATE_CONDITIONS,
  MAX_PREDICATE_DEPTH,
  OutputPathSchema,
  PathSchema,
  PREDICATE_OPERATORS,
  PREDICATE_SOURCES,
  type Predicate,
} from '@triad/protocol';
import { leafOperator, leafReference, render } from './evaluate.js';
import { referenceText } from './references.js';

/** A condition as the Lua evaluator reads it: all (A), any (O) or a leaf (source step, path, operator, operand). */
export type PlanPredicate = { A: PlanPredicate[] } | { O: PlanPredicate[] } | { s: string; p: string[]; o: string; v: unknown };

export function compilePredicate(p: Predicate): PlanPredicate {
  if ('all' in p) return { A: p.all.map(compilePredicate) };
  if ('any' in p) return { O: p.any.map(compilePredicate) };
  const ref = leafReference(p);
  const { op, operand } = leafOperator(p);
  return { s: ref.step, p: ref.path, o: op, v: operand };
}

/** Leaves and the deepest nesting of all/any (a leaf alone is 0, `{ all: [leaf] }` is 1). */
export function predicateSize(p: Predicate): { conditions: number; depth: number } {
  if ('all' in p || 'any' in p) {
    const parts = ('all' in p ? p.all : p.any).map(predicateSize);
    return { conditions: parts.reduce((n, x) => n + x.conditions, 0), depth: 1 + Math.max(0, ...parts.map((x) => x.depth)) };
  }
  return { conditions: 1, depth: 0 };
}

/** The steps whose outputs a condition reads. */
export function predicateOutputs(p: Predicate): string[] {
  if ('all' in p) return p.all.flatMap(predicateOutputs);
  if ('any' in p) return p.any.flatMap(predicateOutputs);
  return p.output !== undefined ? [leafReference(p).step] : [];
}

/** "amount > 1000", "any(country in ["FR","DE"], score.risk >= 0.7)": what `triad workflows show` prints. */
export function describePredicate(p: Predicate): string {
  if ('all' in p) return `all(${p.all.map(describePredicate).join(', ')})`;
  if ('any' in p) return `any(${p.any.map(describePredicate).join(', ')})`;
  const where = referenceText(leafReference(p));
  const { op, operand } = leafOperator(p);
  const text: Record<string, string> = { eq: '=', ne: '!=', gt: '>', gte: '>=', lt: '<', lte: '<=' };
  if (op === 'exists') return operand === true ? `${where} exists` : `${where} is absent or null`;
  if (op === 'in') return `${where} in [${(operand as unknown[]).map(render).join(',')}]`;
  return `${where} ${text[op] ?? op} ${render(operand)}`;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown): boolean => v === null || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)) || (typeof v === 'string' && v.length <= 1000);
const FIELDS = [...PREDICATE_SOURCES, ...PREDICATE_OPERATORS, 'all', 'any'];

/**
 * Every problem of a raw condition, each naming where it is (`when.any[1]`), with the step's name in
 * front (`step "x": …`). Also its size against the documented caps. Empty when the condition is valid.
 */
export function predicateProblems(raw: unknown, step: string, at = 'when'): string[] {
  const problems: string[] = [];
  const walk = (p: unknown, where: string, depth: number): void => {
    if (!isObject(p)) {
      problems.push(`step "${step}": ${where} must be a condition: { input | output, and one of ${PREDICATE_OPERATORS.join(' ')} }, or { all: [...] } or { any: [...] }`);
      return;
    }
    const keys = Object.keys(p).filter((k) => p[k] !== undefined);
    for (const k of keys) if (!FIELDS.includes(k)) problems.push(`step "${step}": ${where} has "${k}", which is not a condition field (${FIELDS.join(', ')})`);
    const group = keys.filter((k) => k === 'all' || k === 'any');
    if (group.length > 0) {
      const others = keys.filter((k) => FIELDS.includes(k) && k !== group[0]);
      if (others.length > 0) {
        problems.push(`step "${step}": ${where} combines ${group[0]} with ${others.join(', ')}: put each condition in the list of ${group[0]}`);
        return;
      }
      const name = group[0] as 'all' | 'any';
      const list = p[name];
      if (!Array.isArray(list) || list.length < 1 || list.length > 16) {
        problems.push(`step "${step}": ${where}.${name} must be a list of 1 to 16 conditions`);
        return;
      }
      list.forEach((c, i) => walk(c, `${where}.${name}[${i}]`, depth + 1));
      return;
    }
    const has = (k: string): boolean => keys.includes(k);
    const sources = PREDICATE_SOURCES.filter(has);
    const operators = PREDICATE_OPERATORS.filter(has);
    if (sources.length !== 1 || operators.length !== 1) {
      const found = [...sources, ...operators];
      const listed = found.length === 0 ? 'none' : found.length === 1 ? found[0] : `${found.slice(0, -1).join(', ')} and ${found[found.length - 1]}`;
      problems.push(`step "${step}": ${where} must name one of input or output, and exactly one of ${PREDICATE_OPERATORS.join(' ')} (it has ${listed})`);
    }
    if (has('input') && !PathSchema.safeParse(p['input']).success) {
      problems.push(`step "${step}": ${where}.input ${JSON.stringify(p['input'])} is not a path: 1-8 segments separated by "." (e.g. "amount", "customer.zip", "items.0.sku")`);
    }
    if (has('output') && !OutputPathSchema.safeParse(p['output']).success) {
      problems.push(`step "${step}": ${where}.output ${JSON.stringify(p['output'])} is not an output reference: "<step>" or "<step>.<path>" (e.g. "score.risk")`);
    }
    for (const op of operators) {
      const v = p[op];
      if ((op === 'eq' || op === 'ne') && !isScalar(v)) problems.push(`step "${step}": ${where}.${op} must be a string (at most 1000 characters), a number, true, false or null`);
      if ((op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte') && !((typeof v === 'number' && Number.isFinite(v)) || (typeof v === 'string' && v.length <= 1000))) {
        problems.push(`step "${step}": ${where}.${op} must be a number or a string (at most 1000 characters)`);
      }
      if (op === 'in' && !(Array.isArray(v) && v.length >= 1 && v.length <= 100 && v.every(isScalar))) {
        problems.push(`step "${step}": ${where}.in must be a list of 1 to 100 strings, numbers, booleans or nulls`);
      }
      if (op === 'exists' && typeof v !== 'boolean') problems.push(`step "${step}": ${where}.exists must be true or false`);
    }
  };
  walk(raw, at, 0);
  if (problems.length === 0) problems.push(...predicateSizeProblems(raw as Predicate, step, at));
  return problems;
}

/** The documented caps: at most 32 conditions and 4 levels of all/any. */
export function predicateSizeProblems(p: Predicate, step: string, at = 'when'): string[] {
  const { conditions, depth } = predicateSize(p);
  const out: string[] = [];
  if (conditions > MAX_PREDICATE_CONDITIONS) out.push(`step "${step}": ${at} has ${conditions} conditions; at most ${MAX_PREDICATE_CONDITIONS} (and ${MAX_PREDICATE_DEPTH} levels of all/any)`);
  if (depth > MAX_PREDICATE_DEPTH) out.push(`step "${step}": ${at} nests all/any ${depth} levels deep; at most ${MAX_PREDICATE_DEPTH} (and ${MAX_PREDICATE_CONDITIONS} conditions)`);
  return out;
}
