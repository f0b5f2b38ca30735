/**
 * The fuzzer's oracle: whether a message is valid, and if not why, asked of @triad/protocol's own
 * decoders and schemas — never of a hand-kept list — so the fuzzer follows the schemas as they evolve.
 */
import { ErrorCode, decode, decodeResults, decodeStepRequests, type TriadError } from '@triad/protocol';
import type { z } from 'zod';

/** Why a message is invalid: too big, not decodable at all, or decodable but against the schema. */
export type InvalidKind = 'oversize' | 'undecodable' | 'schema';

export type Verdict =
  | { valid: true; value: unknown }
  | {
      valid: false;
      kind: InvalidKind;
      message: string;
      /** The schema's issues, each `<field path>: <what is wrong>` ("(root)" for the message itself). */
      details: readonly string[];
    };

/** A rejection turned into a verdict, classified by its code and whether the schema listed issues. */
export function invalidVerdict(error: TriadError): Verdict {
  const kind: InvalidKind = error.code === ErrorCode.PayloadTooLarge ? 'oversize' : error.details.length > 0 ? 'schema' : 'undecodable';
  return { valid: false, kind, message: error.message, details: error.details };
}

export function judge(bytes: Uint8Array, schema: z.ZodType, what: string): Verdict {
  const d = decode(bytes, schema, what);
  return d.ok ? { valid: true, value: d.value } : invalidVerdict(d.error);
}

/** One result of a results message as the scheduler will see it: its own bytes and verdict. */
export interface ResultVerdictItem {
  bytes: Uint8Array;
  verdict: Verdict;
}

/** A results message: invalid as a whole, or a list of results each valid or not on its own. */
export type ResultsVerdict = { whole: Verdict } | { items: ResultVerdictItem[] };

export function judgeResults(bytes: Uint8Array): ResultsVerdict {
  const d = decodeResults(bytes);
  if (!d.ok) return { whole: invalidVerdict(d.error) };
  return { items: d.value.items.map((i) => ({ bytes: i.bytes, verdict: i.ok ? { valid: true, value: i.value } : invalidVerdict(i.error) })) };
}

/** The field paths a verdict's issues name, as they appear in a reason: `error.retryable:`, `(root):`. */
export function namedPaths(details: readonly string[]): string[] {
  return [...new Set(details.map((d) => d.slice(0, d.indexOf(': ') + 1)).filter((p) => p.length > 1))];
}

/** A step request batch as the agent will see it (decision 0023): invalid as a whole, or its items. */
export function judgeStepRequests(bytes: Uint8Array): ResultsVerdict {
  const d = decodeStepRequests(bytes);
  if (!d.ok) return { whole: invalidVerdict(d.error) };
  return { items: d.value.map((i) => ({ bytes: i.bytes, verdict: i.ok ? { valid: true, value: i.value } : invalidVerdict(i.error) })) };
}
