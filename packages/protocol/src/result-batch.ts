/**
 * Results on the results subject come one per message or several per message. An agent under load
 * sends the results that finished while its previous publish was in flight as one batch (decision
 * 0008): `{ results: [<encoded StepResult>, …] }`. Each result stays separately encoded, so the
 * scheduler validates, applies and dead-letters each on its own, with its own bytes.
 */
import { z } from 'zod';
import { DEFAULT_MAX_MESSAGE_BYTES, decodeWithOpaquePayload, unpackUntrusted, validate, type Decoded } from './codec.js';
import { ErrorCode, TriadError } from './errors.js';
import { StepResultSchema, type StepResult } from './messages.js';

/** The most results one batch carries. */
export const MAX_RESULTS_PER_BATCH = 256;

export const StepResultBatchSchema = z
  .object({
    results: z.array(z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'each result of a batch must be binary: an encoded step result')).min(1).max(MAX_RESULTS_PER_BATCH),
    /**
     * The W3C `traceparent` of each result's step attempt, in the order of `results` ('' for none):
     * what the header is for a result sent alone (decision 0013). Optional; extra entries are ignored.
     */
    traceparents: z.array(z.string().max(256, 'a traceparent is at most 256 characters')).max(MAX_RESULTS_PER_BATCH).optional(),
  });
export type StepResultBatch = z.output<typeof StepResultBatchSchema>;

/** One result of a results message: decoded and validated, or the reason it is not, with its bytes. */
export type ResultItem = ({ ok: true; value: StepResult; bytes: Uint8Array; output?: Uint8Array } | { ok: false; error: TriadError; bytes: Uint8Array }) & {
  /** The result's trace context in a batch (its `traceparent`), when the agent sent one. */
  traceparent?: string;
};

/**
 * Decodes a results message. `single` is set for a message holding one bare result; `items` for a
 * batch (each item valid or not on its own). Fails only when the message as a whole cannot be read.
 */
export function decodeResults(bytes: Uint8Array, maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES): Decoded<{ single: boolean; items: ResultItem[] }> {
  if (bytes.length > maxBytes) {
    return { ok: false, error: new TriadError(ErrorCode.PayloadTooLarge, `step result message is ${bytes.length} bytes, over the limit of ${maxBytes}`) };
  }
  // A large result's output is carried as its bytes, never decoded here (decision 0025).
  const opaque = decodeWithOpaquePayload(bytes, StepResultSchema, 'step result', 'output', maxBytes);
  if (opaque) return opaque.ok ? { ok: true, value: { single: true, items: [{ ok: true, value: opaque.value.value, bytes, output: opaque.value.payload }] } } : opaque;
  const unpacked = unpackUntrusted(bytes, 'step result');
  if (!unpacked.ok) return unpacked;
  const raw = unpacked.value;
  if (raw !== null && typeof raw === 'object' && 'results' in raw) {
    const batch = validate(raw, StepResultBatchSchema, 'step result batch');
    if (!batch.ok) return batch;
    const traces = batch.value.traceparents ?? [];
    return {
      ok: true,
      value: {
        single: false,
        items: batch.value.results.map((b, i) => {
          const it = item(b, `step result ${i + 1} of a batch`);
          const tp = traces[i];
          return tp ? { ...it, traceparent: tp } : it;
        }),
      },
    };
  }
  const one = validate(raw, StepResultSchema, 'step result');
  if (!one.ok) return one;
  return { ok: true, value: { single: true, items: [{ ok: true, value: one.value, bytes }] } };
}

function item(bytes: Uint8Array, what: string): ResultItem {
  const opaque = decodeWithOpaquePayload(bytes, StepResultSchema, what, 'output');
  if (opaque) return opaque.ok ? { ok: true, value: opaque.value.value, bytes, output: opaque.value.payload } : { ok: false, error: opaque.error, bytes };
  const raw = unpackUntrusted(bytes, what);
  if (!raw.ok) return { ok: false, bytes, error: raw.error };
  const d = validate(raw.value, StepResultSchema, what);
  return d.ok ? { ok: true, value: d.value, bytes } : { ok: false, error: d.error, bytes };
}
