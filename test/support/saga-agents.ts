// A test agent whose behaviour its task input scripts: it applies one effect per step on a ledger
// service (LEDGER_URL) under the step's idempotency key, and undoes it in its compensation. The input
// says where to fail permanently, which compensation fails (once, or always) and how long steps take.
// A fan-out element (decision 0019 §4) is named `<step>#<index>` in those, applies its own key with its
// value as the payload, and returns `{ index, value, result }`.
import { PermanentError, defineAgent } from '@triad/agent';

export interface SagaInput {
  /** The step that fails permanently. */
  failAt?: string;
  /** A compensation that fails: `once` (its first attempt only) or `always`. */
  compFail?: { step: string; mode: 'once' | 'always' };
  /** Milliseconds a step takes, by step name. */
  delayMs?: Record<string, number>;
}

const ledger = (): string => {
  const url = process.env['LEDGER_URL'];
  if (!url) throw new Error('LEDGER_URL is not set');
  return url;
};

async function post(path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
  const res = await fetch(`${ledger()}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
  if (!res.ok) throw new Error(`ledger ${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new Error('aborted'));
    });
  });
}

export const worker = defineAgent<SagaInput>({
  name: 'worker',
  retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 },
  async handler({ input, step, item, idempotencyKey, signal }) {
    const name = item ? `${step}#${item.index}` : step;
    const delay = input.delayMs?.[name];
    if (delay) await sleep(delay, signal);
    // Refused before anything is applied: an undo of the task can skip this step (decision 0009).
    if (input.failAt === name) throw new PermanentError(`${name} refused`, { notApplied: true });
    if (!item) return post('/apply', { idempotencyKey, action: step }, signal);
    const applied = await post('/apply', { idempotencyKey, action: step, payload: item.value ?? null }, signal);
    return { index: item.index, value: item.value ?? null, result: (applied as { result?: unknown }).result };
  },
  async compensate({ input, step, item, attempt, idempotencyKey, undoes, signal }) {
    const f = input.compFail;
    const name = item ? `${step}#${item.index}` : step;
    if (f && f.step === name && (f.mode === 'always' || attempt === 1)) throw new Error(`undo of ${name} failed`);
    return post('/undo', { idempotencyKey, of: undoes }, signal);
  },
});
