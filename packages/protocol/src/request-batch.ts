/**
 * Step requests travel one per message or, to an agent that announced it takes them, several per
 * message (decision 0023): `{ requests: [<encoded StepRequest>, …] }` on `triad.<ns>.step.b~<agent>`.
 * Each request stays separately encoded, so the agent validates, runs and dead-letters each on its own,
 * with its own bytes — the shape of the result batches (decision 0008).
 */
import { z } from 'zod';
import { DEFAULT_MAX_MESSAGE_BYTES, unpackUntrusted, validate, type Decoded } from './codec.js';
import { ErrorCode, TriadError } from './errors.js';
import { StepRequestSchema, type StepRequest } from './messages.js';

/** The most step requests one batch carries. */
export const MAX_REQUESTS_PER_BATCH = 64;

export const StepRequestBatchSchema = z.object({
  requests: z
    .array(z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'each request of a batch must be binary: an encoded step request'))
    .min(1)
    .max(MAX_REQUESTS_PER_BATCH),
  /**
   * The W3C `traceparent` of each request's dispatch, in the order of `requests` ('' for none): what the
   * header is for a request sent alone (decision 0013). Optional; extra entries are ignored.
   */
  traceparents: z.array(z.string().max(256, 'a traceparent is at most 256 characters')).max(MAX_REQUESTS_PER_BATCH).optional(),
});
export type StepRequestBatch = z.output<typeof StepRequestBatchSchema>;

/** One request of a batch: decoded and validated, or the reason it is not, with its bytes. */
export type RequestItem = ({ ok: true; value: StepRequest; bytes: Uint8Array } | { ok: false; error: TriadError; bytes: Uint8Array }) & {
  /** The request's trace context (its `traceparent`), when the scheduler sent one. */
  traceparent?: string;
};

/**
 * Decodes a step request batch into its items, each valid or not on its own. Fails only when the
 * message as a whole cannot be read as a batch (then nothing in it can be run).
 */
export function decodeStepRequests(bytes: Uint8Array, maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES): Decoded<RequestItem[]> {
  if (bytes.length > maxBytes) {
    return { ok: false, error: new TriadError(ErrorCode.PayloadTooLarge, `step request batch is ${bytes.length} bytes, over the limit of ${maxBytes}`) };
  }
  const unpacked = unpackUntrusted(bytes, 'step request batch');
  if (!unpacked.ok) return unpacked;
  const batch = validate(unpacked.value, StepRequestBatchSchema, 'step request batch');
  if (!batch.ok) return batch;
  const traces = batch.value.traceparents ?? [];
  const n = batch.value.requests.length;
  return {
    ok: true,
    value: batch.value.requests.map((b, i) => {
      const it = item(b, `step request ${i + 1} of ${n} in a batch`);
      const tp = traces[i];
      return tp ? { ...it, traceparent: tp } : it;
    }),
  };
}

function item(bytes: Uint8Array, what: string): RequestItem {
  const raw = unpackUntrusted(bytes, what);
  if (!raw.ok) return { ok: false, bytes, error: raw.error };
  const d = validate(raw.value, StepRequestSchema, what);
  return d.ok ? { ok: true, value: d.value, bytes } : { ok: false, error: d.error, bytes };
}
