/**
 * The dashboard's HTTP server (fastify): the page and its bundle, a JSON API over the client SDK, live
 * updates as server-sent events, and the operator actions — refused unless the probe found the role.
 * The browser never talks to NATS.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { TriadClient } from '@triad/client';
import { ErrorCode, NameSchema, TASK_ID_PATTERN, TaskIdSchema, TaskStatusSchema, TriadError, errorMessage, tagProblems, type TaskEvent } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';
import { DashboardData } from './data.js';
import { LiveHub } from './live.js';
import { TERMINAL_TASK } from './view.js';
import { TOPICS, type Topic } from './view.js';

/** Where the build puts the page's bundle (dist/web, next to dist/dashboard). */
const WEB_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'web');
const ASSETS: Record<string, string> = { '/': 'index.html', '/assets/app.js': 'app.js', '/assets/app.css': 'app.css' };
const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

const CancelBody = z.object({ reason: z.string().max(500).optional() }).strict();
const SignalBody = z.object({ name: NameSchema, data: z.unknown().optional(), id: z.string().regex(TASK_ID_PATTERN, 'a signal id is 1-128 characters of A-Z a-z 0-9 _ : -').optional() }).strict();
const RetryBody = z.object({ step: z.string().min(1).max(64).optional(), input: z.unknown().optional() }).strict();
const SeqParam = z.coerce.number().int().min(1);

export interface DashboardServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

const SearchQuery = z
  .object({ tags: z.string().min(1).max(2_000), status: TaskStatusSchema.optional(), workflow: NameSchema.optional(), cursor: z.string().min(1).max(400).optional() })
  .strict();

/**
 * The dashboard's tag filter, `customer=c-42 region=eu` (space- or comma-separated `key=value`), checked as
 * `triad list --tag` checks its own: every problem named, Triad's own `triad.` keys allowed.
 */
export function parseTagFilter(text: string): Record<string, string> {
  const tags: Record<string, string> = {};
  const problems: string[] = [];
  for (const part of text.split(/[\s,]+/).filter((x) => x !== '')) {
    const eq = part.indexOf('=');
    if (eq <= 0) problems.push(`"${part}" is not key=value (e.g. customer=c-42)`);
    else if (part.slice(0, eq) in tags) problems.push(`tag ${part.slice(0, eq)} given twice`);
    else tags[part.slice(0, eq)] = part.slice(eq + 1);
  }
  if (problems.length === 0 && Object.keys(tags).length === 0) problems.push('name at least one tag as key=value (e.g. customer=c-42)');
  problems.push(...(problems.length === 0 ? tagProblems(tags, { allowReserved: true }) : []));
  if (problems.length > 0) throw new TriadError(ErrorCode.InvalidMessage, `tags: ${problems.join('; ')}`);
  return tags;
}

export async function startDashboard(client: TriadClient, o: { port: number; host: string; log: Logger }): Promise<DashboardServer> {
  const data = new DashboardData(client);
  await data.probe();
  const hub = new LiveHub(data, o.log);
  const app = Fastify({ logger: false, bodyLimit: 1_100_000 });
  const streams = new Set<() => void>();
  // On a loopback address, only requests that name it: a page of another site whose name an attacker
  // points at 127.0.0.1 (DNS rebinding) is the same origin to the browser, but sends its own Host.
  const allowedHost = loopbackHostCheck(o.host, () => (app.server.address() as { port?: number } | null)?.port);
  app.addHook('onRequest', async (req, reply) => {
    if (!allowedHost(req.headers.host)) {
      await reply.code(403).send({ error: { code: 'HTTP', message: `the dashboard answers only requests for ${o.host} or localhost: open it by that address` } });
    }
  });

  for (const [path, file] of Object.entries(ASSETS)) {
    app.get(path, async (_req, reply) => {
      const body = await readFile(join(WEB_DIR, file)).catch(() => undefined);
      if (!body) return reply.code(500).type('text/plain').send(`the dashboard's ${file} is missing from ${WEB_DIR}: build the CLI (npm run build)`);
      return reply.type(TYPES[file.split('.').pop() ?? ''] ?? 'application/octet-stream').header('cache-control', 'no-cache').send(body);
    });
  }

  app.get('/api/identity', () => Promise.resolve(data.me));
  app.get('/api/tasks/:id', async (req) => data.task(taskIdOf(req)));
  app.get('/api/workflows', async () => data.workflows());
  // Tasks by their tags (decision 0021 §1.7): task.query from the index, a page at a time; a client-role
  // dashboard's SDK asks on its own client-scoped subject, so it finds its own tasks only.
  app.get('/api/search', async (req) => {
    const q = SearchQuery.safeParse(req.query);
    if (!q.success) throw new TriadError(ErrorCode.InvalidMessage, `bad search: ${q.error.issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; ')}`);
    const tags = parseTagFilter(q.data.tags);
    return client.queryTasks({ tags, limit: 100, ...(q.data.status ? { status: q.data.status } : {}), ...(q.data.workflow ? { workflow: q.data.workflow } : {}), ...(q.data.cursor ? { cursor: q.data.cursor } : {}) });
  });
  app.get('/api/dead-letters', async (req) => {
    const q = z.object({ source: z.string().min(1).max(80).optional() }).safeParse(req.query);
    if (!q.success) throw new TriadError(ErrorCode.InvalidMessage, `bad query: ${q.error.issues.map((i) => i.message).join('; ')}`);
    return client.deadLetters({ ...(q.data.source ? { source: q.data.source } : {}), limit: 200 });
  });

  app.post('/api/tasks/:id/cancel', async (req) => {
    const id = taskIdOf(req);
    const body = parseBody(req, CancelBody);
    return data.act(`cancel task ${id}`, 'task.cancel', () => client.cancel(id, body.reason ?? 'cancelled from the dashboard'));
  });
  app.post('/api/tasks/:id/signal', async (req) => {
    const id = taskIdOf(req);
    const body = parseBody(req, SignalBody);
    return data.signal(id, body.name, body.data, body.id);
  });
  app.post('/api/tasks/:id/retry', async (req) => {
    const id = taskIdOf(req);
    const body = parseBody(req, RetryBody);
    return data.act(`retry task ${id}`, 'task.retry', () => client.retry(id, { ...(body.step ? { step: body.step } : {}), ...('input' in body ? { input: body.input } : {}) }));
  });
  // Schedules (decision 0019 §6): an operator's to read and to pause or resume.
  app.get('/api/schedules', async () => {
    data.requireOperator('list the schedules');
    return client.listSchedules();
  });
  app.post('/api/schedules/:name/pause', async (req) => {
    const name = scheduleNameOf(req);
    return data.act(`pause schedule ${name}`, 'schedule.pause', () => client.pauseSchedule(name));
  });
  app.post('/api/schedules/:name/resume', async (req) => {
    const name = scheduleNameOf(req);
    return data.act(`resume schedule ${name}`, 'schedule.resume', () => client.resumeSchedule(name));
  });
  // An agent type's keys with the most waiting (the limits page, on a click; decision 0020 §6).
  app.get('/api/limits/:agent/keys', async (req) => {
    const agent = NameSchema.safeParse((req.params as { agent?: string }).agent);
    if (!agent.success) throw new TriadError(ErrorCode.InvalidMessage, `not an agent type: ${agent.error.issues[0]?.message ?? 'invalid'}`);
    const q = z.object({ keys: z.coerce.number().int().min(1).max(100).optional() }).strict().safeParse(req.query);
    if (!q.success) throw new TriadError(ErrorCode.InvalidMessage, `bad query: ${q.error.issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; ')}`);
    const status = await data.limitKeys(agent.data, q.data.keys ?? 10);
    if (!status) throw new TriadError(ErrorCode.UnknownStep, `no dispatch limit for agent type ${agent.data}: triad limits list shows the agent types that have one`);
    return status;
  });
  app.post('/api/dead-letters/:seq/replay', async (req) => {
    const seq = SeqParam.safeParse((req.params as { seq?: string }).seq);
    if (!seq.success) throw new TriadError(ErrorCode.InvalidMessage, 'the dead letter sequence must be a whole number ≥ 1');
    // The subject the page showed: the replay publishes there or nowhere (decision 0022).
    const body = parseBody(req, z.object({ subject: z.string().min(1) }).strict());
    return data.act(`replay dead letter ${seq.data}`, 'dlq.replay', () => client.replayDeadLetter(seq.data, { expectSubject: body.subject }));
  });

  // One stream per tab: GET /api/live?topics=identity,tasks[&task=<id>] — the topics' snapshots and,
  // with a task, its state and events (history first) as they happen.
  app.get('/api/live', (req, reply) => {
    const q = req.query as { topics?: string; task?: string };
    const topics = String(q.topics ?? 'tasks')
      .split(',')
      .filter((t): t is Topic => (TOPICS as readonly string[]).includes(t));
    const task = q.task === undefined ? undefined : TaskIdSchema.safeParse(q.task);
    if (task && !task.success) throw new TriadError(ErrorCode.InvalidMessage, `not a task id: ${task.error.issues[0]?.message ?? 'invalid'}`);
    const send = openStream(req, reply, streams);
    const unsubscribe = hub.subscribe(topics, (topic, value) => send(topic, value));
    const ac = new AbortController();
    req.raw.on('close', () => {
      unsubscribe();
      ac.abort();
    });
    if (task?.data) void followTask(data, task.data, send, ac.signal).catch((e: unknown) => send('problem', { topic: 'task', message: errorMessage(e) }));
  });

  app.setErrorHandler((e, _req, reply) => {
    const status = e instanceof TriadError ? statusOf(e) : typeof (e as { statusCode?: number }).statusCode === 'number' ? ((e as { statusCode: number }).statusCode) : 500;
    void reply.code(status).send({ error: { code: e instanceof TriadError ? e.code : 'HTTP', message: errorMessage(e) } });
  });

  await app.listen({ port: o.port, host: o.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : o.port;
  return {
    app,
    url: `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`,
    close: async () => {
      hub.close();
      for (const end of streams) end();
      await app.close();
    },
  };
}

/** For a loopback bind address, a check that a request's Host header names this server; any Host otherwise. */
export function loopbackHostCheck(bindHost: string, port: () => number | undefined): (host: string | undefined) => boolean {
  const loopback = ['127.0.0.1', 'localhost', '::1', '[::1]'];
  if (!loopback.includes(bindHost)) return () => true;
  return (host) => {
    if (host === undefined) return false;
    const p = port();
    return loopback.some((h) => host === `${h.includes(':') && !h.startsWith('[') ? `[${h}]` : h}:${p ?? ''}` || (p === 80 && host === h));
  };
}

function taskIdOf(req: FastifyRequest): string {
  const id = TaskIdSchema.safeParse((req.params as { id?: string }).id);
  if (!id.success) throw new TriadError(ErrorCode.InvalidMessage, `not a task id: ${id.error.issues[0]?.message ?? 'invalid'}`);
  return id.data;
}

function scheduleNameOf(req: FastifyRequest): string {
  const name = NameSchema.safeParse((req.params as { name?: string }).name);
  if (!name.success) throw new TriadError(ErrorCode.InvalidMessage, `not a schedule name: ${name.error.issues[0]?.message ?? 'invalid'}`);
  return name.data;
}

/** Actions take JSON only: a cross-site form cannot send it without the browser asking first (CORS). */
function parseBody<T>(req: FastifyRequest, schema: z.ZodType<T>): T {
  if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new TriadError(ErrorCode.InvalidMessage, 'send the action as JSON (content-type: application/json)');
  }
  const b = schema.safeParse(req.body ?? {});
  if (!b.success) throw new TriadError(ErrorCode.InvalidMessage, `bad request body: ${b.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`);
  return b.data;
}

function statusOf(e: TriadError): number {
  switch (e.code) {
    case ErrorCode.UnknownTask:
    case ErrorCode.UnknownWorkflow:
    case ErrorCode.UnknownStep:
      return 404;
    case ErrorCode.InvalidMessage:
    case ErrorCode.PayloadTooLarge:
      return 400;
    case ErrorCode.InvalidState:
    case ErrorCode.Stale:
      return e.message.includes('operator role') ? 403 : 409;
    case ErrorCode.Unavailable:
      return 503;
    default:
      return 500;
  }
}

/** Opens a server-sent-events response; returns its `send(event, data)`. A comment every 15 s keeps proxies from closing it. */
function openStream(req: FastifyRequest, reply: FastifyReply, streams: Set<() => void>): (event: string, data: unknown) => void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write(': connected\n\n');
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
  const end = (): void => {
    clearInterval(keepAlive);
    streams.delete(end);
    res.end();
  };
  streams.add(end);
  req.raw.on('close', end);
  return (event, data) => {
    if (!res.writableEnded) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
}

/**
 * A task's state and events for its page: the events as the SDK's watch yields them (history, then
 * live), the state again after each burst; once the task has ended, its state is polled so that a retry
 * (which brings it back) starts the events again. Events are sent once each (by seq).
 */
async function followTask(data: DashboardData, taskId: string, send: (event: string, data: unknown) => void, signal: AbortSignal): Promise<void> {
  let detail = await data.task(taskId);
  send('state', detail);
  const seen = new Set<number>();
  let pending: NodeJS.Timeout | undefined;
  const sendState = (): void => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = undefined;
      void data.task(taskId).then((d) => {
        if (signal.aborted) return;
        detail = d;
        send('state', d);
      }, () => undefined);
    }, 150);
  };
  // While it runs, its waiting reasons are asked again every 2 s (the probe answers change without events).
  const explain = setInterval(() => {
    if (!TERMINAL_TASK.has(detail.task.status)) sendState();
  }, 2_000);
  signal.addEventListener('abort', () => clearInterval(explain), { once: true });
  while (!signal.aborted) {
    try {
      for await (const ev of data.client.watch(taskId, { signal, ...(detail.task.client ? { owner: detail.task.client } : {}) })) {
        if (seen.has(ev.seq)) continue;
        seen.add(ev.seq);
        send('event', ev satisfies TaskEvent);
        sendState();
      }
    } catch (e) {
      send('problem', { topic: 'task', message: `the events of task ${taskId} cannot be read: ${errorMessage(e)}` });
    }
    // Ended (or unreadable): look again every second, and follow the events again when there are new ones.
    const lastSeq = Math.max(0, ...seen);
    while (!signal.aborted) {
      await new Promise((r) => setTimeout(r, 1_000));
      const now = await data.task(taskId).catch(() => undefined);
      if (!now) continue;
      if (JSON.stringify(now) !== JSON.stringify(detail)) {
        detail = now;
        send('state', now);
      }
      if (seen.size > 0 && now.task.seq > lastSeq) break;
    }
  }
  clearTimeout(pending);
  clearInterval(explain);
}
