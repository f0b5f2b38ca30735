/** A small local HTTP stand-in for one remote service of the order example: it applies effects once per idempotency key, records them for tests, and injects faults that can be changed from outside. */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The example's three services; any other name works too and gets a generic result. */
export type ServiceName = 'inventory' | 'payment' | 'shipping' | (string & {});

/** Fault knobs. They apply only to POST /apply and POST /undo, checked in this order: latency, rate limit, hang, fail. */
export interface Faults {
  /** 0..1: probability of answering 503 without applying anything. */
  failRate: number;
  /** 0..1: probability of never answering (the socket stays open until the client goes away or the service closes). */
  hangRate: number;
  /** Whole milliseconds to wait before handling the request. */
  latencyMs: number;
  /**
   * Calls accepted per second, 0 = no limit: a call that arrives when this many were accepted in the
   * last 1000 ms is answered 429 with Retry-After (whole seconds until the window has room, at least 1),
   * and nothing is applied (decision 0020 §8).
   */
  rateLimit: number;
}

/** What the service saw of its POST /apply and /undo calls (GET /stats; decision 0020 §8). */
export interface ServiceStats {
  /** The most calls held at once (from arrival to answer, latency and hangs included). */
  maxInFlight: number;
  /** Arrival time (epoch ms) of every call received, refused ones included, oldest first; the last 100,000. */
  calls: number[];
  /** Calls held now. */
  inFlight: number;
  /** Calls answered 429 by the rate limit. */
  throttled: number;
}

/** The calls GET /stats keeps. */
export const MAX_STATS_CALLS = 100_000;

/**
 * One entry of the service's ledger, per idempotency key: an applied effect, or a tombstone — an undo
 * that came before any apply of its key (decision 0009's contract: the undo succeeds and every later
 * apply of that key is refused, because a late request can reach the service after its undo).
 */
export interface Effect {
  idempotencyKey: string;
  /** The action applied; null for a tombstone. */
  action: string | null;
  /** The payload as sent (without its `document`, see below), or null when none was sent (or for a tombstone). */
  payload: unknown;
  /**
   * A large `document` string in the payload (decision 0021 §4: an order with a 20 MB attachment): kept
   * as its size in bytes (UTF-8) and SHA-256 instead of the text. Null when the payload had none.
   */
  document: { bytes: number; sha256: string } | null;
  /** False for a tombstone: nothing was ever applied under this key. */
  applied: boolean;
  tombstone: boolean;
  /** ISO timestamp of the first (and only) application; null for a tombstone. */
  appliedAt: string | null;
  /** Made-up but deterministic result: the same key always yields the same result. Null for a tombstone. */
  result: Record<string, unknown> | null;
  /** How many POST /apply requests for this key were answered (1 + duplicates); faulted requests are not counted. */
  calls: number;
  /** POST /apply requests refused because the key was undone first (the tombstone honoured). */
  lateApplies: number;
  undone: boolean;
  undoneAt: string | null;
  /** The idempotency key of the undo that undid this effect (or left the tombstone). */
  undoneBy: string | null;
  undoResult: Record<string, unknown> | null;
  /** Times the effect was actually reverted: 1 after an undo, never more (0 for a tombstone). */
  reversals: number;
}

export interface RemoteServiceOptions {
  name: ServiceName;
  /** 0 (the default) picks any free port. */
  port?: number;
  /** Defaults to 127.0.0.1 so the stand-ins are never reachable from elsewhere. */
  host?: string;
  faults?: Partial<Faults>;
  /** Source of randomness for fault decisions; inject one in tests for determinism. */
  random?: () => number;
}

export interface RemoteService {
  readonly name: string;
  /** Base URL, e.g. http://127.0.0.1:7101 (no trailing slash). */
  readonly url: string;
  readonly port: number;
  faults(): Faults;
  /** Changes fault knobs at run time; throws on invalid values (same rules as PUT /faults). */
  setFaults(f: Partial<Faults>): void;
  /** A snapshot (deep copy) of every recorded effect, in order of application. */
  effects(): Effect[];
  /**
   * The POST /apply and /undo requests the service holds right now (waiting out their latency, or
   * hanging), with the idempotency key they carry: a test can act once a call has surely arrived.
   */
  waiting(): { path: string; idempotencyKey: string }[];
  /** GET /stats: what the service saw of its calls (a copy). */
  stats(): ServiceStats;
  /** POST /stats/reset: empties `calls`, sets maxInFlight to the calls held now, zeroes `throttled`. */
  resetStats(): void;
  /** Stops listening and destroys every open socket, hanging ones included. */
  close(): Promise<void>;
}

/** Request bodies above this size get 413. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

export const NO_FAULTS: Readonly<Faults> = Object.freeze({ failRate: 0, hangRate: 0, latencyMs: 0, rateLimit: 0 });

interface FaultRule {
  envSuffix: string;
  allowed: string;
  /** For env values: the text must look like this before it is converted, so '0x1' or '1e0' are refused. */
  pattern: RegExp;
  valid: (n: number) => boolean;
}

const RATE_ALLOWED = 'a number from 0 to 1 (e.g. 0.25; 0 = never, 1 = always)';
const FAULT_RULES: Record<keyof Faults, FaultRule> = {
  failRate: { envSuffix: 'FAIL_RATE', allowed: RATE_ALLOWED, pattern: /^\d+(\.\d+)?$/, valid: (n) => Number.isFinite(n) && n >= 0 && n <= 1 },
  hangRate: { envSuffix: 'HANG_RATE', allowed: RATE_ALLOWED, pattern: /^\d+(\.\d+)?$/, valid: (n) => Number.isFinite(n) && n >= 0 && n <= 1 },
  latencyMs: { envSuffix: 'LATENCY_MS', allowed: 'a whole number of milliseconds >= 0 (e.g. 200)', pattern: /^\d+$/, valid: (n) => Number.isSafeInteger(n) && n >= 0 },
  rateLimit: { envSuffix: 'RATE_LIMIT', allowed: 'a whole number of calls per second >= 0 (e.g. 10; 0 = no limit)', pattern: /^\d+$/, valid: (n) => Number.isSafeInteger(n) && n >= 0 },
};
const FAULT_KEYS = Object.keys(FAULT_RULES) as (keyof Faults)[];

/** Environment variable prefix for a service name: 'payment' -> 'PAYMENT', 'fraud-check' -> 'FRAUD_CHECK'. */
export function envPrefix(name: string): string {
  return name.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
}

/**
 * Reads <NAME>_FAIL_RATE, <NAME>_HANG_RATE, <NAME>_LATENCY_MS and <NAME>_RATE_LIMIT; unset or empty means no fault.
 * Throws an Error naming the variable, the bad value and what is allowed, so a typo fails at start-up rather than silently disabling a fault.
 */
export function faultsFromEnv(name: string, env: NodeJS.ProcessEnv = process.env): Faults {
  const faults: Faults = { ...NO_FAULTS };
  for (const key of FAULT_KEYS) {
    const rule = FAULT_RULES[key];
    const variable = `${envPrefix(name)}_${rule.envSuffix}`;
    const raw = env[variable];
    if (raw === undefined || raw.trim() === '') continue;
    const text = raw.trim();
    const n = Number(text);
    if (!rule.pattern.test(text) || !rule.valid(n)) {
      throw new Error(`${variable}=${JSON.stringify(raw)} is not allowed: expected ${rule.allowed}`);
    }
    faults[key] = n;
  }
  return faults;
}

/** Validates a partial Faults object from an untrusted source; `where` prefixes the error message. */
function validateFaultsPatch(input: unknown, where: string): Partial<Faults> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new Error(`${where} must be a JSON object with any of ${FAULT_KEYS.join(', ')}, e.g. {"failRate":0.5}`);
  }
  const patch: Partial<Faults> = {};
  for (const [key, value] of Object.entries(input)) {
    if (!(FAULT_KEYS as string[]).includes(key)) {
      throw new Error(`${where}: unknown field "${key}"; allowed fields are ${FAULT_KEYS.join(', ')}`);
    }
    const rule = FAULT_RULES[key as keyof Faults];
    if (typeof value !== 'number' || !rule.valid(value)) {
      throw new Error(`${where}: ${key}=${JSON.stringify(value)} is not allowed: expected ${rule.allowed}`);
    }
    patch[key as keyof Faults] = value;
  }
  return patch;
}

/** Signals a client mistake; the message says what was wrong and what to send instead. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function digest(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 16);
}

/** The made-up result of applying an effect; derived from the key so it is identical across runs and restarts. */
function applyResult(service: string, idempotencyKey: string, payload: unknown): Record<string, unknown> {
  const id = digest(service, 'apply', idempotencyKey);
  switch (service) {
    case 'inventory':
      return { reservationId: `res_${id}`, items: reservedLines(payload) };
    case 'payment':
      return { chargeId: `ch_${id}`, amount: paymentAmount(payload) };
    case 'shipping': {
      // `labelBytes`: a shipping label of that many bytes comes back (the example's large output).
      const labelBytes = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>)['labelBytes'] : undefined;
      const label = typeof labelBytes === 'number' && Number.isSafeInteger(labelBytes) && labelBytes > 0 ? { label: 'L'.repeat(Math.min(labelBytes, MAX_BODY_BYTES)) } : {};
      return { trackingNumber: `TRK${BigInt(`0x${id}`).toString().padStart(20, '0').slice(-12)}`, ...label };
    }
    default:
      return { ref: `${envPrefix(service).toLowerCase()}_${id}` };
  }
}

function undoResult(service: string, undoKey: string, effect: Effect): Record<string, unknown> {
  const id = digest(service, 'undo', undoKey);
  const applied = effect.result ?? {};
  switch (service) {
    case 'inventory':
      return { released: applied['reservationId'] };
    case 'payment':
      return { refundId: `re_${id}`, chargeId: applied['chargeId'], amount: applied['amount'] };
    case 'shipping':
      return { cancelled: applied['trackingNumber'] };
    default:
      return { reverted: applied['ref'] };
  }
}

/** The order as a whole: the one line reserved (and so shipped) for an order that lists no items. */
export const WHOLE_ORDER_LINE = { sku: 'whole-order', qty: 1 } as const;

/**
 * What the inventory reserved, line by line: the payload's `items` when it lists any, else the order as
 * a whole (one line). The example's `ship` step fans out over this list (decision 0019 §19), so every
 * order ships at least once and an order's lines each ship under their own key.
 */
function reservedLines(payload: unknown): unknown[] {
  const items = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>)['items'] : undefined;
  return Array.isArray(items) && items.length > 0 ? structuredClone(items) : [{ ...WHOLE_ORDER_LINE }];
}

/** Payment's result depends on the payload's amount, so it insists on one. */
function paymentAmount(payload: unknown): number {
  const amount = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>)['amount'] : undefined;
  if (typeof amount !== 'number' || !Number.isFinite(amount) || amount < 0) {
    throw new HttpError(400, `payment needs payload.amount as a number >= 0 (got ${describe(amount)}); send e.g. {"idempotencyKey":"order-1:charge","action":"charge","payload":{"amount":42.5}}`);
  }
  return amount;
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  const json = JSON.stringify(value);
  return json.length > 80 ? `${json.slice(0, 77)}...` : json;
}

function requireKey(body: Record<string, unknown>, field: string, example: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value.trim() === '') {
    throw new HttpError(400, `"${field}" must be a non-empty string (got ${describe(value)}); send e.g. ${example}`);
  }
  return value;
}

const APPLY_EXAMPLE = '{"idempotencyKey":"order-1:reserve","action":"reserve","payload":{"sku":"A1","qty":2}}';
const UNDO_EXAMPLE = '{"idempotencyKey":"order-1:reserve:undo","of":"order-1:reserve"}';
const ROUTES = 'POST /apply, POST /undo, GET /effects, GET /effects/:key, GET /faults, PUT /faults, GET /stats, POST /stats/reset, GET /health';

type Body = { tooLarge: true } | { tooLarge: false; text: string };

/** Reads the whole body; past the limit it keeps draining without buffering so the client still receives the 413 instead of a reset. */
function readBody(req: IncomingMessage, limit: number): Promise<Body> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    let ended = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        tooLarge = true;
        chunks.length = 0;
      } else if (!tooLarge) chunks.push(chunk);
    });
    req.on('end', () => {
      ended = true;
      resolve(tooLarge ? { tooLarge: true } : { tooLarge: false, text: Buffer.concat(chunks).toString('utf8') });
    });
    req.on('error', reject);
    req.on('close', () => {
      if (!ended) reject(new Error('client went away while sending the body'));
    });
  });
}

async function readJsonObject(req: IncomingMessage, example: string): Promise<Record<string, unknown>> {
  const body = await readBody(req, MAX_BODY_BYTES);
  if (body.tooLarge) throw new HttpError(413, `request body is larger than ${MAX_BODY_BYTES} bytes; send a smaller JSON object`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.text);
  } catch {
    throw new HttpError(400, `body is not valid JSON (got ${describe(body.text.slice(0, 80))}); send a JSON object, e.g. ${example}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new HttpError(400, `body must be a JSON object (got ${describe(parsed)}); send e.g. ${example}`);
  }
  return parsed as Record<string, unknown>;
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Outcome of one undo request, remembered under the undo's own key so a retry gets the same answer. */
interface UndoRecord {
  of: string;
  result: Record<string, unknown>;
}

export async function startRemoteService(opts: RemoteServiceOptions): Promise<RemoteService> {
  const name = opts.name;
  if (typeof name !== 'string' || name.trim() === '') throw new Error(`startRemoteService: name must be a non-empty string (got ${describe(name)})`);
  const host = opts.host ?? '127.0.0.1';
  const requestedPort = opts.port ?? 0;
  if (!Number.isInteger(requestedPort) || requestedPort < 0 || requestedPort > 65535) {
    throw new Error(`startRemoteService(${name}): port=${describe(requestedPort)} is not allowed: expected a whole number from 0 to 65535 (0 = any free port)`);
  }
  const random = opts.random ?? Math.random;
  let faults: Faults = { ...NO_FAULTS, ...validateFaultsPatch(opts.faults ?? {}, `startRemoteService(${name}) faults`) };

  // Insertion-ordered, so effects() lists them in order of application.
  const effects = new Map<string, Effect>();
  const undos = new Map<string, UndoRecord>();
  const held = new Set<{ path: string; idempotencyKey: string }>();
  // GET /stats: arrivals, the calls held now and at most, 429s; `accepted` is the rate limit's window.
  let calls: number[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let throttled = 0;
  const accepted: number[] = [];
  // Latency timers are tracked so close() does not have to wait for them to fire.
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });

  /** Returns false when the request must not be answered (hang) or has been answered already (fail). */
  async function injectFaults(res: ServerResponse): Promise<boolean> {
    const current = faults;
    if (current.latencyMs > 0) await sleep(current.latencyMs);
    if (closed) return false;
    if (current.rateLimit > 0) {
      const now = Date.now();
      while (accepted.length > 0 && (accepted[0] ?? 0) <= now - 1_000) accepted.shift();
      if (accepted.length >= current.rateLimit) {
        throttled += 1;
        // Whole seconds (RFC 9110 allows no fraction) until the oldest accepted call leaves the window.
        const seconds = Math.max(1, Math.ceil(((accepted[0] ?? now) + 1_000 - now) / 1_000));
        send(res, 429, { error: `${name} is rate limited to ${current.rateLimit} calls/s (rateLimit); nothing was applied, retry after ${seconds} s` }, { 'retry-after': String(seconds) });
        return false;
      }
      accepted.push(now);
    }
    // Draw only when a rate is set, so an injected random sequence maps one value to one decision.
    if (current.hangRate > 0 && random() < current.hangRate) return false; // Leave the socket open; close() or the client ends it.
    if (current.failRate > 0 && random() < current.failRate) {
      send(res, 503, { error: `${name} injected failure (failRate=${current.failRate}); nothing was applied, retry later or PUT /faults to heal` });
      return false;
    }
    return true;
  }

  function apply(body: Record<string, unknown>): unknown {
    const idempotencyKey = requireKey(body, 'idempotencyKey', APPLY_EXAMPLE);
    const action = requireKey(body, 'action', APPLY_EXAMPLE);
    const existing = effects.get(idempotencyKey);
    if (existing?.tombstone) {
      existing.lateApplies += 1;
      throw new HttpError(409, `idempotencyKey "${idempotencyKey}" was undone before it was applied (undo "${existing.undoneBy ?? ''}"); this late apply is refused and nothing was applied`);
    }
    if (existing) {
      // Reusing a key for another action is a caller bug that would otherwise be silently swallowed as a duplicate.
      if (existing.action !== action) {
        throw new HttpError(409, `idempotencyKey "${idempotencyKey}" was already used for action "${existing.action}", not "${action}"; use a new idempotencyKey for a different action`);
      }
      existing.calls += 1;
      return { applied: true, duplicate: true, result: structuredClone(existing.result) };
    }
    const sent = body['payload'] === undefined ? null : body['payload'];
    const result = applyResult(name, idempotencyKey, sent);
    let payload = sent;
    let document: Effect['document'] = null;
    if (typeof sent === 'object' && sent !== null && typeof (sent as Record<string, unknown>)['document'] === 'string') {
      const { document: text, ...rest } = sent as Record<string, unknown> & { document: string };
      document = { bytes: Buffer.byteLength(text, 'utf8'), sha256: createHash('sha256').update(text, 'utf8').digest('hex') };
      payload = rest;
    }
    effects.set(idempotencyKey, {
      idempotencyKey,
      action,
      payload,
      document,
      applied: true,
      tombstone: false,
      appliedAt: new Date().toISOString(),
      result,
      calls: 1,
      lateApplies: 0,
      undone: false,
      undoneAt: null,
      undoneBy: null,
      undoResult: null,
      reversals: 0,
    });
    return { applied: true, duplicate: false, result: structuredClone(result) };
  }

  function undo(body: Record<string, unknown>): unknown {
    const idempotencyKey = requireKey(body, 'idempotencyKey', UNDO_EXAMPLE);
    const of = requireKey(body, 'of', UNDO_EXAMPLE);
    const previous = undos.get(idempotencyKey);
    if (previous) {
      if (previous.of !== of) {
        throw new HttpError(409, `undo idempotencyKey "${idempotencyKey}" was already used to undo "${previous.of}", not "${of}"; use a new idempotencyKey for another undo`);
      }
      return { undone: true, duplicate: true, of, result: structuredClone(previous.result) };
    }
    const effect = effects.get(of);
    if (!effect) {
      // Undoing an effect that never happened must succeed, and must make a later apply of that key a
      // no-op: leave a tombstone (a request still on the wire can arrive after its undo).
      const result = { tombstone: true };
      effects.set(of, {
        idempotencyKey: of,
        action: null,
        payload: null,
        document: null,
        applied: false,
        tombstone: true,
        appliedAt: null,
        result: null,
        calls: 0,
        lateApplies: 0,
        undone: true,
        undoneAt: new Date().toISOString(),
        undoneBy: idempotencyKey,
        undoResult: result,
        reversals: 0,
      });
      undos.set(idempotencyKey, { of, result });
      return { undone: true, duplicate: false, of, tombstone: true, result: structuredClone(result) };
    }
    if (effect.undone && effect.undoResult) {
      // Already undone under another key: the effect is reverted once; this key just learns the outcome.
      undos.set(idempotencyKey, { of, result: effect.undoResult });
      return { undone: true, duplicate: true, of, result: structuredClone(effect.undoResult) };
    }
    const result = undoResult(name, idempotencyKey, effect);
    effect.undone = true;
    effect.undoneAt = new Date().toISOString();
    effect.undoneBy = idempotencyKey;
    effect.undoResult = result;
    effect.reversals += 1;
    undos.set(idempotencyKey, { of, result });
    return { undone: true, duplicate: false, of, result: structuredClone(result) };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const path = new URL(req.url ?? '/', 'http://service.invalid').pathname;

    if (method === 'GET' && path === '/health') return send(res, 200, { ok: true, name });

    if (method === 'POST' && (path === '/apply' || path === '/undo')) {
      // Read the body first so a fault never leaves an unread request on the connection.
      const body = await readJsonObject(req, path === '/apply' ? APPLY_EXAMPLE : UNDO_EXAMPLE);
      const call = { path, idempotencyKey: typeof body['idempotencyKey'] === 'string' ? body['idempotencyKey'] : '' };
      calls.push(Date.now());
      if (calls.length > MAX_STATS_CALLS) calls.splice(0, calls.length - MAX_STATS_CALLS);
      inFlight += 1;
      if (inFlight > maxInFlight) maxInFlight = inFlight;
      res.once('close', () => (inFlight -= 1));
      held.add(call);
      // A hanging request stays listed until the client goes away.
      res.once('close', () => held.delete(call));
      const proceed = await injectFaults(res);
      // Answered (or about to be applied): no longer held. A hang (not answered) stays listed until close.
      if (proceed || res.writableEnded) held.delete(call);
      if (!proceed) return;
      return send(res, 200, path === '/apply' ? apply(body) : undo(body));
    }

    if (method === 'GET' && path === '/effects') return send(res, 200, { effects: [...effects.values()] });
    if (method === 'GET' && path.startsWith('/effects/')) {
      let key: string;
      try {
        key = decodeURIComponent(path.slice('/effects/'.length));
      } catch {
        throw new HttpError(400, `effect key in ${path} is not valid percent-encoding; encode it with encodeURIComponent`);
      }
      const effect = effects.get(key);
      if (!effect) return send(res, 404, { error: `no effect with idempotencyKey "${key}" on ${name}; GET /effects lists the recorded ones` });
      return send(res, 200, effect);
    }

    if (method === 'GET' && path === '/stats') return send(res, 200, stats());
    if (method === 'POST' && path === '/stats/reset') {
      req.resume();
      resetStats();
      return send(res, 200, { reset: true });
    }
    if (method === 'GET' && path === '/faults') return send(res, 200, faults);
    if (method === 'PUT' && path === '/faults') {
      const body = await readJsonObject(req, '{"failRate":0,"hangRate":0,"latencyMs":0,"rateLimit":0}');
      let patch: Partial<Faults>;
      try {
        patch = validateFaultsPatch(body, 'PUT /faults body');
      } catch (err) {
        throw new HttpError(400, (err as Error).message);
      }
      faults = { ...faults, ...patch };
      return send(res, 200, faults);
    }

    // Drain any body so the connection stays usable for the client's next request.
    req.resume();
    send(res, 404, { error: `no route ${method} ${path} on ${name}; routes are ${ROUTES}` });
  }

  function stats(): ServiceStats {
    return { maxInFlight, calls: [...calls], inFlight, throttled };
  }
  function resetStats(): void {
    calls = [];
    maxInFlight = inFlight;
    throttled = 0;
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof HttpError) send(res, err.status, { error: err.message });
      else send(res, 500, { error: `${name} failed unexpectedly: ${err instanceof Error ? err.message : String(err)}` });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(requestedPort, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  let closing: Promise<void> | undefined;
  return {
    name,
    url,
    port,
    faults: () => ({ ...faults }),
    setFaults(f: Partial<Faults>): void {
      faults = { ...faults, ...validateFaultsPatch(f, `${name}.setFaults`) };
    },
    effects: () => structuredClone([...effects.values()]),
    waiting: () => [...held].map((c) => ({ ...c })),
    stats,
    resetStats,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve, reject) => {
        closed = true;
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close((err) => (err ? reject(err) : resolve()));
        // server.close() alone waits for hanging and keep-alive sockets; destroy them so close is prompt.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
