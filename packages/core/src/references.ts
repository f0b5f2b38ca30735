/**
 * Where a condition, a fan-out list or a child input reads a value (decision 0019 §1.3): the task input
 * or a step's output, and a path of segments into it. One form for the definition's three spellings
 * ("<path>", { input }, { output: "<step>[.<path>]" }), for the plan, the checks and the evaluator.
 */
import type { ValueRef } from '@triad/protocol';

export interface Reference {
  /** '' = the task input, else the step whose output is read. */
  step: string;
  /** Segments: a map key, or a 0-based index (digits) into an array. */
  path: string[];
}

export function inputReference(path: string): Reference {
  return { step: '', path: path.split('.') };
}

/** "<step>" or "<step>.<path>". */
export function outputReference(ref: string): Reference {
  const [step = '', ...path] = ref.split('.');
  return { step, path };
}

export function valueReference(ref: ValueRef): Reference {
  if (typeof ref === 'string') return inputReference(ref);
  return 'input' in ref ? inputReference(ref.input) : outputReference(ref.output);
}

/** How a reason names the place: the path for the input, "<step>.<path>" (or "<step>") for an output. */
export function referenceText(r: Reference): string {
  if (r.step === '') return r.path.join('.');
  return r.path.length > 0 ? `${r.step}.${r.path.join('.')}` : r.step;
}
