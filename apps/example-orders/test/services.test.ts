/** Tests the stand-in remote services over real HTTP: once-per-key effects, idempotent undo, fault injection, validation and routing. */
import { describe, it, expect, afterEach } from 'vitest';
import { MAX_BODY_BYTES, WHOLE_ORDER_LINE, faultsFromEnv, startRemoteService } from '../src/services/index.js';
import type { RemoteService, RemoteServiceOptions } from '../src/services/index.js';
import { startExampleServices } from '../src/services/main.js';

const started: RemoteService[] = [];

async function start(opts: RemoteServiceOptions): Promise<RemoteService> {
  const service = await startRemoteService({ port: 0, ...opts });
  started.push(service);
  return service;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

// Response bodies are read loosely in assertions: any JSON value, indexable.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test-only loose JSON view
type Json = any;

async function call(service: RemoteService, method: string, path: string, body?: unknown, init: RequestInit = {}): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${service.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
  return { status: res.status, json: await res.json() };
}

/** A random source that replays the given values, so fault decisions are deterministic. */
function sequence(...values: number[]): () => number {
  let i = 0;
  return () => {
    const value = values[i++];
    if (value === undefined) throw new Error('random sequence exhausted');
    return value;
  };
}

describe('POST /apply', () => {
  it('the inventory reports the lines it reserved: the order\'s items, or the order as a whole', async () => {
    const inventory = await start({ name: 'inventory' });
    const items = [{ sku: 'A1', qty: 2 }, { sku: 'B7', qty: 1 }];
    const listed = await call(inventory, 'POST', '/apply', { idempotencyKey: 'o1/reserve', action: 'reserve', payload: { orderId: 'o1', items } });
    expect(listed.json).toMatchObject({ applied: true, result: { items } });
    const none = await call(inventory, 'POST', '/apply', { idempotencyKey: 'o2/reserve', action: 'reserve', payload: { orderId: 'o2', items: [] } });
    expect(none.json).toMatchObject({ applied: true, result: { items: [WHOLE_ORDER_LINE] } });
  });

  it('applies an effect once per idempotency key and answers repeats with the same result', async () => {
    const inventory = await start({ name: 'inventory' });
    const body = { idempotencyKey: 'order-1:reserve', action: 'reserve', payload: { sku: 'A1', qty: 2 } };

    const first = await call(inventory, 'POST', '/apply', body);
    expect(first.status).toBe(200);
    // The payload lists no items: the inventory reserves the order as a whole, one line (what ship fans out over).
    expect(first.json).toEqual({ applied: true, duplicate: false, result: { reservationId: expect.stringMatching(/^res_/), items: [WHOLE_ORDER_LINE] } });

    const second = await call(inventory, 'POST', '/apply', body);
    const third = await call(inventory, 'POST', '/apply', body);
    expect(second.json).toEqual({ applied: true, duplicate: true, result: first.json.result });
    expect(third.json).toEqual(second.json);

    const effects = inventory.effects();
    expect(effects).toHaveLength(1);
    expect(effects[0]).toMatchObject({ idempotencyKey: 'order-1:reserve', action: 'reserve', payload: { sku: 'A1', qty: 2 }, result: first.json.result, calls: 3, undone: false, undoneAt: null });

    const listed = await call(inventory, 'GET', '/effects');
    expect(listed.json.effects).toEqual(effects);
    const one = await call(inventory, 'GET', `/effects/${encodeURIComponent('order-1:reserve')}`);
    expect(one).toEqual({ status: 200, json: effects[0] });
  });

  it('keeps separate keys separate and derives results deterministically from the key', async () => {
    const a = await start({ name: 'payment' });
    const b = await start({ name: 'payment' });
    const charge = (key: string) => ({ idempotencyKey: key, action: 'charge', payload: { amount: 42.5 } });

    const onA = await call(a, 'POST', '/apply', charge('order-1:charge'));
    const onB = await call(b, 'POST', '/apply', charge('order-1:charge'));
    const other = await call(a, 'POST', '/apply', charge('order-2:charge'));
    expect(onA.json.result).toEqual({ chargeId: expect.stringMatching(/^ch_/), amount: 42.5 });
    expect(onB.json.result).toEqual(onA.json.result);
    expect(other.json.result.chargeId).not.toBe(onA.json.result.chargeId);
    expect(a.effects().map((e) => e.idempotencyKey)).toEqual(['order-1:charge', 'order-2:charge']);

    const shipping = await start({ name: 'shipping' });
    const shipped = await call(shipping, 'POST', '/apply', { idempotencyKey: 'order-1:ship', action: 'ship' });
    expect(shipped.json.result).toEqual({ trackingNumber: expect.stringMatching(/^TRK\d{12}$/) });
    expect(shipping.effects()[0]?.payload).toBeNull();
  });

  it('refuses reusing a key for a different action', async () => {
    const inventory = await start({ name: 'inventory' });
    await call(inventory, 'POST', '/apply', { idempotencyKey: 'k', action: 'reserve' });
    const clash = await call(inventory, 'POST', '/apply', { idempotencyKey: 'k', action: 'release' });
    expect(clash.status).toBe(409);
    expect(clash.json.error).toContain('already used for action "reserve"');
    expect(inventory.effects()[0]?.calls).toBe(1);
  });
});

describe('POST /undo', () => {
  it('undoes an effect once, idempotently by its own key', async () => {
    const payment = await start({ name: 'payment' });
    const applied = await call(payment, 'POST', '/apply', { idempotencyKey: 'order-1:charge', action: 'charge', payload: { amount: 10 } });

    const undo = { idempotencyKey: 'order-1:refund', of: 'order-1:charge' };
    const first = await call(payment, 'POST', '/undo', undo);
    expect(first).toEqual({ status: 200, json: { undone: true, duplicate: false, of: 'order-1:charge', result: { refundId: expect.stringMatching(/^re_/), chargeId: applied.json.result.chargeId, amount: 10 } } });
    const repeat = await call(payment, 'POST', '/undo', undo);
    expect(repeat.json).toEqual({ ...first.json, duplicate: true });

    // A second compensation under another key must not refund twice.
    const otherKey = await call(payment, 'POST', '/undo', { idempotencyKey: 'order-1:refund-again', of: 'order-1:charge' });
    expect(otherKey.json).toEqual({ ...first.json, duplicate: true });

    const [effect] = payment.effects();
    expect(effect).toMatchObject({ applied: true, tombstone: false, undone: true, undoneBy: 'order-1:refund', undoneAt: expect.any(String), undoResult: first.json.result, reversals: 1 });
    expect(payment.effects()).toHaveLength(1);
  });

  it('an undo of an effect never applied succeeds and leaves a tombstone: a late apply of that key is refused', async () => {
    const inventory = await start({ name: 'inventory' });
    const undo = { idempotencyKey: 'order-9:release', of: 'order-9:reserve' };
    const first = await call(inventory, 'POST', '/undo', undo);
    expect(first).toEqual({ status: 200, json: { undone: true, duplicate: false, of: 'order-9:reserve', tombstone: true, result: { tombstone: true } } });
    expect(inventory.effects()).toEqual([
      expect.objectContaining({ idempotencyKey: 'order-9:reserve', applied: false, tombstone: true, undone: true, undoneBy: 'order-9:release', reversals: 0, lateApplies: 0 }),
    ]);
    // The same undo again is a duplicate of the first.
    expect((await call(inventory, 'POST', '/undo', undo)).json).toMatchObject({ undone: true, duplicate: true });

    // The late apply (a request that was still on the wire) is refused, and nothing is applied.
    const late = await call(inventory, 'POST', '/apply', { idempotencyKey: 'order-9:reserve', action: 'reserve' });
    expect(late.status).toBe(409);
    expect(late.json.error).toMatch(/was undone before it was applied/);
    expect(inventory.effects()).toEqual([expect.objectContaining({ idempotencyKey: 'order-9:reserve', applied: false, tombstone: true, lateApplies: 1, calls: 0 })]);
  });
});

describe('waiting()', () => {
  it('lists the calls the service holds (latency or hang) with their key, and forgets them once answered', async () => {
    const payment = await start({ name: 'payment', faults: { latencyMs: 300 } });
    const body = { idempotencyKey: 'order-5:charge', action: 'charge', payload: { amount: 5 } };
    const pending = call(payment, 'POST', '/apply', body);
    await expect.poll(() => payment.waiting(), { timeout: 5_000 }).toEqual([{ path: '/apply', idempotencyKey: 'order-5:charge' }]);
    expect((await pending).status).toBe(200);
    expect(payment.waiting()).toEqual([]);
    const hanging = await start({ name: 'shipping', faults: { hangRate: 1 } });
    const controller = new AbortController();
    const hung = call(hanging, 'POST', '/undo', { idempotencyKey: 'u-1', of: 'k-1' }, { signal: controller.signal }).catch(() => 'aborted');
    await expect.poll(() => hanging.waiting(), { timeout: 5_000 }).toEqual([{ path: '/undo', idempotencyKey: 'u-1' }]);
    controller.abort();
    expect(await hung).toBe('aborted');
    await expect.poll(() => hanging.waiting(), { timeout: 5_000 }).toEqual([]);
  });
});

describe('fault injection', () => {
  it('answers 503 with failRate 1, records nothing, and heals with setFaults', async () => {
    const payment = await start({ name: 'payment', faults: { failRate: 1 } });
    const body = { idempotencyKey: 'order-1:charge', action: 'charge', payload: { amount: 5 } };

    const failed = await call(payment, 'POST', '/apply', body);
    expect(failed.status).toBe(503);
    expect(failed.json.error).toContain('injected failure');
    expect((await call(payment, 'POST', '/undo', { idempotencyKey: 'u', of: 'x' })).status).toBe(503);
    expect(payment.effects()).toEqual([]);
    // Health is never subject to faults.
    expect(await call(payment, 'GET', '/health')).toEqual({ status: 200, json: { ok: true, name: 'payment' } });

    payment.setFaults({ failRate: 0 });
    const healed = await call(payment, 'POST', '/apply', body);
    expect(healed.status).toBe(200);
    expect(payment.effects()).toHaveLength(1);
  });

  it('uses the injected random source for each decision', async () => {
    const inventory = await start({ name: 'inventory', faults: { failRate: 0.5 }, random: sequence(0.9, 0.1, 0.5) });
    const statuses: number[] = [];
    for (const key of ['a', 'b', 'c']) statuses.push((await call(inventory, 'POST', '/apply', { idempotencyKey: key, action: 'reserve' })).status);
    expect(statuses).toEqual([200, 503, 200]);
    expect(inventory.effects().map((e) => e.idempotencyKey)).toEqual(['a', 'c']);
  });

  it('hangs with hangRate 1 until the client gives up, and close() still returns', async () => {
    const shipping = await start({ name: 'shipping', faults: { hangRate: 1 } });
    const hung = call(shipping, 'POST', '/apply', { idempotencyKey: 'order-1:ship', action: 'ship' }, { signal: AbortSignal.timeout(300) });
    await expect(hung).rejects.toMatchObject({ name: expect.stringMatching(/^(TimeoutError|AbortError)$/) });
    expect(shipping.effects()).toEqual([]);

    // Leave one request hanging on an open socket; close() must destroy it rather than wait for it.
    const controller = new AbortController();
    const pending = fetch(`${shipping.url}/apply`, { method: 'POST', body: JSON.stringify({ idempotencyKey: 'k', action: 'ship' }), signal: controller.signal }).catch((err: unknown) => err);
    expect((await call(shipping, 'GET', '/health')).status).toBe(200);
    await shipping.close();
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
  });

  it('applies latency and still answers', async () => {
    const inventory = await start({ name: 'inventory', faults: { latencyMs: 20 } });
    expect((await call(inventory, 'POST', '/apply', { idempotencyKey: 'k', action: 'reserve' })).status).toBe(200);
  });

  it('reads and changes faults over HTTP, validating the body', async () => {
    const inventory = await start({ name: 'inventory' });
    expect(await call(inventory, 'GET', '/faults')).toEqual({ status: 200, json: { failRate: 0, hangRate: 0, latencyMs: 0, rateLimit: 0 } });

    const changed = await call(inventory, 'PUT', '/faults', { failRate: 1, latencyMs: 5 });
    expect(changed).toEqual({ status: 200, json: { failRate: 1, hangRate: 0, latencyMs: 5, rateLimit: 0 } });
    expect(inventory.faults()).toEqual({ failRate: 1, hangRate: 0, latencyMs: 5, rateLimit: 0 });
    expect((await call(inventory, 'POST', '/apply', { idempotencyKey: 'k', action: 'reserve' })).status).toBe(503);

    const badRate = await call(inventory, 'PUT', '/faults', { failRate: 2 });
    expect(badRate.status).toBe(400);
    expect(badRate.json.error).toContain('failRate=2 is not allowed');
    const unknown = await call(inventory, 'PUT', '/faults', { failrate: 0 });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error).toContain('unknown field "failrate"');
    expect(inventory.faults().failRate).toBe(1);

    expect((await call(inventory, 'PUT', '/faults', { failRate: 0 })).status).toBe(200);
    expect((await call(inventory, 'POST', '/apply', { idempotencyKey: 'k', action: 'reserve' })).status).toBe(200);
  });

  it('rejects invalid faults passed in code', async () => {
    await expect(startRemoteService({ name: 'inventory', faults: { hangRate: -1 } })).rejects.toThrow(/hangRate=-1 is not allowed/);
    const inventory = await start({ name: 'inventory' });
    expect(() => inventory.setFaults({ latencyMs: 1.5 })).toThrow(/latencyMs=1.5 is not allowed: expected a whole number/);
  });
});

describe('rate limit and stats (decision 0020 §8)', () => {
  it('answers 429 with Retry-After above rateLimit calls per second, applies nothing, and counts what it saw', async () => {
    const payment = await start({ name: 'payment' });
    const set = await call(payment, 'PUT', '/faults', { rateLimit: 3 });
    expect(set.json.rateLimit).toBe(3);
    const statuses: number[] = [];
    let refusal: Response | undefined;
    // Sent one after another, well inside one second: the first 3 are taken, the rest refused.
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${payment.url}/apply`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ idempotencyKey: `k${i}`, action: 'charge', payload: { amount: 1 } }) });
      statuses.push(res.status);
      if (res.status === 429) refusal ??= res;
      else await res.text();
    }
    // The window is time-based: a slow machine may let a 4th in after a second passed; never fewer than 3 accepted.
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
    const refused = statuses.filter((s) => s === 429).length;
    expect(refusal?.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    const body = (await refusal?.json()) as { error: string };
    expect(body.error).toMatch(/^payment is rate limited to 3 calls\/s \(rateLimit\); nothing was applied, retry after \d+ s$/);
    expect(payment.effects()).toHaveLength(5 - refused);
    const stats = (await call(payment, 'GET', '/stats')).json;
    expect(stats).toMatchObject({ maxInFlight: 1, inFlight: 0, throttled: refused });
    expect(stats.calls).toHaveLength(5);
    expect([...stats.calls].sort((a: number, b: number) => a - b)).toEqual(stats.calls);
    expect(await call(payment, 'POST', '/stats/reset')).toEqual({ status: 200, json: { reset: true } });
    expect((await call(payment, 'GET', '/stats')).json).toEqual({ maxInFlight: 0, calls: [], inFlight: 0, throttled: 0 });
    // 0 turns it off.
    payment.setFaults({ rateLimit: 0 });
    for (let i = 0; i < 5; i++) expect((await call(payment, 'POST', '/apply', { idempotencyKey: `m${i}`, action: 'charge', payload: { amount: 1 } })).status).toBe(200);
  });

  it('counts calls held at once, latency included', async () => {
    const payment = await start({ name: 'payment', faults: { latencyMs: 300 } });
    await Promise.all([0, 1, 2].map((i) => call(payment, 'POST', '/apply', { idempotencyKey: `c${i}`, action: 'charge', payload: { amount: 1 } })));
    const stats = payment.stats();
    expect(stats.calls).toHaveLength(3);
    // All three were sent at once and each is held 300 ms: at least two overlapped.
    expect(stats.maxInFlight).toBeGreaterThanOrEqual(2);
    expect(stats.inFlight).toBe(0);
  });
});

describe('faultsFromEnv', () => {
  it('reads <NAME>_FAIL_RATE, _HANG_RATE and _LATENCY_MS, defaulting to no faults', () => {
    expect(faultsFromEnv('payment', {})).toEqual({ failRate: 0, hangRate: 0, latencyMs: 0, rateLimit: 0 });
    expect(faultsFromEnv('payment', { PAYMENT_FAIL_RATE: '0.25', PAYMENT_HANG_RATE: '1', PAYMENT_LATENCY_MS: '200', PAYMENT_RATE_LIMIT: '10', INVENTORY_FAIL_RATE: '1' })).toEqual({ failRate: 0.25, hangRate: 1, latencyMs: 200, rateLimit: 10 });
    expect(faultsFromEnv('payment', { PAYMENT_FAIL_RATE: '' })).toEqual({ failRate: 0, hangRate: 0, latencyMs: 0, rateLimit: 0 });
  });

  it('throws an error naming the variable, the bad value and what is allowed', () => {
    expect(() => faultsFromEnv('payment', { PAYMENT_FAIL_RATE: '1.5' })).toThrow('PAYMENT_FAIL_RATE="1.5" is not allowed: expected a number from 0 to 1');
    expect(() => faultsFromEnv('shipping', { SHIPPING_HANG_RATE: 'often' })).toThrow(/SHIPPING_HANG_RATE="often".*from 0 to 1/);
    expect(() => faultsFromEnv('inventory', { INVENTORY_LATENCY_MS: '-5' })).toThrow(/INVENTORY_LATENCY_MS="-5".*whole number of milliseconds/);
    expect(() => faultsFromEnv('inventory', { INVENTORY_LATENCY_MS: '2.5' })).toThrow(/INVENTORY_LATENCY_MS="2.5"/);
    expect(() => faultsFromEnv('payment', { PAYMENT_RATE_LIMIT: '2.5' })).toThrow('PAYMENT_RATE_LIMIT="2.5" is not allowed: expected a whole number of calls per second >= 0 (e.g. 10; 0 = no limit)');
  });
});

describe('input validation and routing', () => {
  it('answers 400 with a clear message for bad bodies', async () => {
    const payment = await start({ name: 'payment' });

    const notJson = await call(payment, 'POST', '/apply', '{nope');
    expect(notJson.status).toBe(400);
    expect(notJson.json.error).toMatch(/not valid JSON.*send a JSON object/);

    const array = await call(payment, 'POST', '/apply', [1]);
    expect(array.status).toBe(400);
    expect(array.json.error).toContain('must be a JSON object');

    const noKey = await call(payment, 'POST', '/apply', { action: 'charge', payload: { amount: 1 } });
    expect(noKey.status).toBe(400);
    expect(noKey.json.error).toMatch(/"idempotencyKey" must be a non-empty string \(got nothing\); send e\.g\./);

    const noAmount = await call(payment, 'POST', '/apply', { idempotencyKey: 'k', action: 'charge', payload: { amount: '10' } });
    expect(noAmount.status).toBe(400);
    expect(noAmount.json.error).toContain('payment needs payload.amount as a number >= 0');

    const noOf = await call(payment, 'POST', '/undo', { idempotencyKey: 'u' });
    expect(noOf.status).toBe(400);
    expect(noOf.json.error).toContain('"of" must be a non-empty string');

    expect(payment.effects()).toEqual([]);
  });

  it('answers 413 for bodies over MAX_BODY_BYTES (64 MiB: a 20 MB document fits, decision 0021 §4)', async () => {
    const inventory = await start({ name: 'inventory' });
    const huge = await call(inventory, 'POST', '/apply', { idempotencyKey: 'k', action: 'reserve', payload: 'x'.repeat(MAX_BODY_BYTES) });
    expect(huge.status).toBe(413);
    expect(huge.json.error).toContain('larger than');
    expect(inventory.effects()).toEqual([]);
  });

  it('answers 404 with a JSON error for unknown routes and effects', async () => {
    const inventory = await start({ name: 'inventory' });
    const route = await call(inventory, 'GET', '/nope');
    expect(route.status).toBe(404);
    expect(route.json.error).toContain('no route GET /nope');
    expect((await call(inventory, 'DELETE', '/apply')).status).toBe(404);
    const effect = await call(inventory, 'GET', '/effects/missing');
    expect(effect.status).toBe(404);
    expect(effect.json.error).toContain('no effect with idempotencyKey "missing"');
  });
});

describe('startExampleServices', () => {
  it('starts inventory, payment, shipping and fraud with ports and faults from env', async () => {
    const services = await startExampleServices({ INVENTORY_PORT: '0', PAYMENT_PORT: '0', SHIPPING_PORT: '0', FRAUD_PORT: '0', PAYMENT_FAIL_RATE: '1' });
    started.push(...services);
    expect(services.map((s) => s.name)).toEqual(['inventory', 'payment', 'shipping', 'fraud']);
    expect(services[1]?.faults().failRate).toBe(1);
    for (const service of services) expect((await call(service, 'GET', '/health')).json).toEqual({ ok: true, name: service.name });
  });

  it('rejects a bad port before starting anything', async () => {
    await expect(startExampleServices({ INVENTORY_PORT: '0', PAYMENT_PORT: 'abc' })).rejects.toThrow('PAYMENT_PORT="abc" is not allowed');
  });
});
