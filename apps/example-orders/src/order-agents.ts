/**
 * The example's agents: each wraps one remote HTTP service (inventory, fraud, payment, shipping), passing the
 * step's idempotency key so the service applies the effect once, and the step's AbortSignal so a call
 * stops when the complete-by window closes.
 */
import { z } from 'zod';
import { PermanentError, RetryableError, defineAgent, throttledFrom } from '@triad/agent';

/** An order's lines at most: `ship` fans out over them (its maxItems), so a longer order is refused at once, before anything is reserved. */
export const MAX_ORDER_LINES = 10;

export const OrderInputSchema = z.object({
  orderId: z.string().min(1),
  amount: z.number().nonnegative(),
  items: z.array(z.object({ sku: z.string(), qty: z.number().int().positive() })).max(MAX_ORDER_LINES, `an order has at most ${MAX_ORDER_LINES} lines (items); split a larger order`).optional(),
  /** An attachment sent to the inventory service with the reservation (a large input, decision 0021 §4). */
  document: z.string().optional(),
  /** Ask the shipping service for a label of this many bytes (a large output). */
  labelBytes: z.number().int().min(0).max(64 * 1024 * 1024).optional(),
});
export type OrderInput = z.infer<typeof OrderInputSchema>;

export interface ServiceUrls {
  inventory: string;
  payment: string;
  shipping: string;
  fraud: string;
}

/** The environment variables an agent reads to find one service. */
export interface ServiceEndpointEnv {
  /** The service's base URL (e.g. http://services:7104 in Compose). */
  readonly urlVariable: string;
  /** Without the URL: the port on 127.0.0.1, the same variable `npm run start:services` listens on. */
  readonly portVariable: string;
  readonly defaultPort: number;
}

/** What each agent reads to reach its service; the Compose test checks the stack against this list. */
export const SERVICE_ENDPOINTS: Readonly<Record<keyof ServiceUrls, ServiceEndpointEnv>> = {
  inventory: { urlVariable: 'INVENTORY_URL', portVariable: 'INVENTORY_PORT', defaultPort: 7101 },
  payment: { urlVariable: 'PAYMENT_URL', portVariable: 'PAYMENT_PORT', defaultPort: 7102 },
  shipping: { urlVariable: 'SHIPPING_URL', portVariable: 'SHIPPING_PORT', defaultPort: 7103 },
  fraud: { urlVariable: 'FRAUD_URL', portVariable: 'FRAUD_PORT', defaultPort: 7104 },
};

export function serviceUrlsFromEnv(env: NodeJS.ProcessEnv = process.env): ServiceUrls {
  const url = ({ urlVariable, portVariable, defaultPort }: ServiceEndpointEnv): string =>
    env[urlVariable] ?? `http://127.0.0.1:${env[portVariable] ?? defaultPort}`;
  return {
    inventory: url(SERVICE_ENDPOINTS.inventory),
    payment: url(SERVICE_ENDPOINTS.payment),
    shipping: url(SERVICE_ENDPOINTS.shipping),
    fraud: url(SERVICE_ENDPOINTS.fraud),
  };
}

/** The connection was refused: the request certainly never reached the service. */
function connectionRefused(e: unknown): boolean {
  const cause = (e as { cause?: { code?: unknown } } | null)?.cause;
  return cause?.code === 'ECONNREFUSED';
}

/**
 * Calls a remote service; a throttle (429, 503 with Retry-After) ends the attempt and waits; other 4xx is permanent (retrying the same request cannot help), 5xx and network
 * errors are retryable. A refused connection, a 4xx and a 503 (the stand-in services answer it without
 * applying anything) are marked `notApplied`, so an undo skips a step none of whose tries took effect;
 * anything else (a timeout, a 500, a reset) leaves the effect unknown (decision 0009).
 */
async function call(url: string, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (connectionRefused(e)) throw new RetryableError(`${url}${path}: connection refused (nothing listening)`, { cause: e, notApplied: true });
    throw e;
  }
  const text = await res.text();
  // A 429, or a 503 with Retry-After: the service asked for time — the attempt ends and the step waits
  // (decision 0020 §5.2). Checked before the 4xx rule, which would make a 429 fail the task.
  const throttle = throttledFrom(res, Date.now(), `${url}${path}`);
  if (throttle) throw throttle;
  if (res.status >= 400 && res.status < 500) throw new PermanentError(`${url}${path} refused the request (${res.status}): ${text}`, { notApplied: true });
  if (res.status === 503) throw new RetryableError(`${url}${path} is unavailable (503): ${text}`, { notApplied: true });
  if (!res.ok) throw new Error(`${url}${path} failed (${res.status}): ${text}`);
  return JSON.parse(text) as unknown;
}

/** Circuit breaker settings for the example's agents: TRIAD_BREAKER_THRESHOLD, TRIAD_BREAKER_HALF_OPEN_MS. */
export function breakerFromEnv(env: NodeJS.ProcessEnv = process.env): { threshold?: number; halfOpenAfterMs?: number } {
  const parsed = z
    .object({ threshold: z.coerce.number().int().min(1).optional(), halfOpenAfterMs: z.coerce.number().int().min(1).optional() })
    .safeParse({ threshold: env['TRIAD_BREAKER_THRESHOLD'] || undefined, halfOpenAfterMs: env['TRIAD_BREAKER_HALF_OPEN_MS'] || undefined });
  if (!parsed.success) throw new Error(`TRIAD_BREAKER_THRESHOLD / TRIAD_BREAKER_HALF_OPEN_MS must be whole numbers >= 1: ${parsed.error.message}`);
  const b: { threshold?: number; halfOpenAfterMs?: number } = {};
  if (parsed.data.threshold !== undefined) b.threshold = parsed.data.threshold;
  if (parsed.data.halfOpenAfterMs !== undefined) b.halfOpenAfterMs = parsed.data.halfOpenAfterMs;
  return b;
}

/** Applies an effect on a service once per idempotency key; resolves with the service's result. */
async function apply(url: string, idempotencyKey: string, action: string, payload: unknown, signal: AbortSignal): Promise<unknown> {
  const r = (await call(url, '/apply', { idempotencyKey, action, payload }, signal)) as { result: unknown };
  return r.result;
}

/**
 * Undoes the effect applied under the step's run key (`undoes`), once per undo key. The services treat
 * an undo of a key never applied as a tombstone, so this is also right when `ctx.effect` is 'unknown'.
 */
async function undo(url: string, ctx: { idempotencyKey: string; undoes?: string; signal: AbortSignal }): Promise<unknown> {
  if (!ctx.undoes) throw new PermanentError('a compensation request must name the effect it undoes');
  return call(url, '/undo', { idempotencyKey: ctx.idempotencyKey, of: ctx.undoes }, ctx.signal);
}

export function orderAgents(urls: ServiceUrls = serviceUrlsFromEnv(), breaker = breakerFromEnv()) {
  const common = { input: OrderInputSchema, breaker };
  const inventory = defineAgent({
    name: 'inventory',
    ...common,
    handler: ({ input, idempotencyKey, signal }) => apply(urls.inventory, idempotencyKey, 'reserve', { orderId: input.orderId, items: input.items ?? [], ...(input.document !== undefined ? { document: input.document } : {}) }, signal),
    // Release the reservation.
    compensate: (ctx) => undo(urls.inventory, ctx),
  });
  const fraud = defineAgent({
    name: 'fraud',
    ...common,
    handler: ({ input, idempotencyKey, signal }) => apply(urls.fraud, idempotencyKey, 'screen', { orderId: input.orderId, amount: input.amount }, signal),
  });
  const payment = defineAgent({
    name: 'payment',
    ...common,
    handler: ({ input, idempotencyKey, signal }) => apply(urls.payment, idempotencyKey, 'charge', { orderId: input.orderId, amount: input.amount }, signal),
    // Refund the charge.
    compensate: (ctx) => undo(urls.payment, ctx),
  });
  const shipping = defineAgent({
    name: 'shipping',
    ...common,
    // Ships the order; in a step that fans out over the order's items (forEach, decision 0019), each
    // element's call ships that item, under the element's own idempotency key.
    handler: ({ input, needs, item, idempotencyKey, signal }) =>
      apply(urls.shipping, idempotencyKey, 'ship', { orderId: input.orderId, reservation: needs['reserve'], charge: needs['charge'], ...(item ? { item: item.value } : {}), ...(input.labelBytes !== undefined ? { labelBytes: input.labelBytes } : {}) }, signal),
    // Cancel the shipment.
    compensate: (ctx) => undo(urls.shipping, ctx),
  });
  return [inventory, fraud, payment, shipping];
}
