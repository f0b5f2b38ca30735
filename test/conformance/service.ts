/**
 * The conformance kit's stand-in for the remote service an agent wraps: the example services' HTTP API
 * (POST /apply {idempotencyKey, action, payload}, POST /undo {idempotencyKey, of}; an effect applied
 * once per key; an undo of a key never applied leaves a tombstone), answering each call as the case
 * scripted it for that key, and recording every call — when it came, and whether the agent waited for
 * the answer or aborted it.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the service answers one call. */
export type Reply =
  /** 200 with the effect applied (or undone) once per key. */
  | { kind: 'ok' }
  /** The same, after a delay (a slow service). */
  | { kind: 'slow'; ms: number }
  /** This status and nothing applied (503: unavailable, retry; 4xx: refused for good). */
  | { kind: 'status'; status: number }
  /** This status with a Retry-After header and nothing applied: the service asks for time (429; decision 0020). */
  | { kind: 'throttle'; status: number; retryAfter: string }
  /** No answer at all: the call stays open until the agent gives up on it. */
  | { kind: 'hang' };

export interface ObservedCall {
  path: string;
  /** The body's idempotencyKey ('' when it had none). */
  idempotencyKey: string;
  /** For an undo: the key it undoes. */
  of?: string;
  action?: string;
  body: unknown;
  startedAt: number;
  /** When the service answered, or the agent closed the call without waiting for the answer. */
  endedAt?: number;
  ended: 'answered' | 'aborted' | 'open';
  /** The status answered. */
  status?: number;
}

export interface ScriptedService {
  readonly url: string;
  /**
   * Scripts the answers for calls carrying `key` (an apply's or an undo's own idempotency key): the
   * n-th call gets replies[n], the last one repeating.
   */
  script(key: string, replies: readonly Reply[]): void;
  /** Records `key` as applied before the run (what a compensation of an applied step undoes). */
  preApply(key: string): void;
  calls(): ObservedCall[];
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1024 * 1024;

export async function startScriptedService(): Promise<ScriptedService> {
  const scripts = new Map<string, readonly Reply[]>();
  const callsPerKey = new Map<string, number>();
  const effects = new Map<string, { tombstone: boolean; result: Record<string, unknown> }>();
  const calls: ObservedCall[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const ref = (key: string): string => `conf_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;

  const send = (res: ServerResponse, call: ObservedCall, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    if (res.destroyed || call.ended !== 'open') return;
    call.ended = 'answered';
    call.endedAt = Date.now();
    call.status = status;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  const effect = (call: ObservedCall): { status: number; body: unknown } => {
    if (call.path === '/apply') {
      const existing = effects.get(call.idempotencyKey);
      if (existing?.tombstone) return { status: 409, body: { error: `idempotencyKey "${call.idempotencyKey}" was undone before it was applied; nothing applied` } };
      if (existing) return { status: 200, body: { applied: true, duplicate: true, result: existing.result } };
      const result = { ref: ref(call.idempotencyKey) };
      effects.set(call.idempotencyKey, { tombstone: false, result });
      return { status: 200, body: { applied: true, duplicate: false, result } };
    }
    const of = call.of ?? '';
    const existing = effects.get(of);
    if (!existing) {
      effects.set(of, { tombstone: true, result: {} });
      return { status: 200, body: { undone: true, of, tombstone: true, result: { tombstone: true } } };
    }
    return { status: 200, body: { undone: true, of, result: { reverted: existing.result['ref'] ?? null } } };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://kit.invalid').pathname;
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    }
    if (req.method !== 'POST' || (path !== '/apply' && path !== '/undo')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `no route ${req.method ?? ''} ${path}: the kit's service has POST /apply and POST /undo` }));
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    const fields = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
    const call: ObservedCall = {
      path,
      idempotencyKey: str(fields['idempotencyKey']) ?? '',
      ...(str(fields['of']) !== undefined ? { of: str(fields['of'])! } : {}),
      ...(str(fields['action']) !== undefined ? { action: str(fields['action'])! } : {}),
      body,
      startedAt: Date.now(),
      ended: 'open',
    };
    calls.push(call);
    res.on('close', () => {
      if (call.ended === 'open') {
        call.ended = 'aborted';
        call.endedAt = Date.now();
      }
    });
    if (call.idempotencyKey === '' || (path === '/undo' && call.of === undefined)) {
      send(res, call, 400, { error: `the body must be JSON with a string idempotencyKey${path === '/undo' ? ' and of' : ''}` });
      return;
    }
    const n = callsPerKey.get(call.idempotencyKey) ?? 0;
    callsPerKey.set(call.idempotencyKey, n + 1);
    const replies = scripts.get(call.idempotencyKey) ?? [{ kind: 'ok' }];
    const reply = replies[Math.min(n, replies.length - 1)] ?? { kind: 'ok' };
    switch (reply.kind) {
      case 'hang':
        return;
      case 'status':
        send(res, call, reply.status, { error: `scripted ${reply.status}: nothing was applied` });
        return;
      case 'throttle':
        send(res, call, reply.status, { error: `scripted ${reply.status}: slow down, nothing was applied` }, { 'retry-after': reply.retryAfter });
        return;
      case 'slow': {
        const timer = setTimeout(() => {
          timers.delete(timer);
          // An aborted call changes nothing: the agent gave up before the service acted.
          if (call.ended !== 'open') return;
          const r = effect(call);
          send(res, call, r.status, r.body);
        }, reply.ms);
        timers.add(timer);
        return;
      }
      case 'ok': {
        const r = effect(call);
        send(res, call, r.status, r.body);
      }
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(JSON.stringify({ error: (e as Error).message }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    script: (key, replies) => {
      if (replies.length === 0) throw new Error(`script for ${key}: give at least one reply`);
      scripts.set(key, replies);
    },
    preApply: (key) => {
      effects.set(key, { tombstone: false, result: { ref: ref(key) } });
    },
    calls: () => calls.map((c) => ({ ...c })),
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
