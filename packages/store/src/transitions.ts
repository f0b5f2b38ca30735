/** Typed views of what the task transitions return (parsed from the Lua reply). */
import { DEFAULT_CLIENT_ID, type TaskEvent, type TaskEventType, type TaskStatus } from '@triad/protocol';
import type { QueueItem } from './limit-store.js';

export interface TransitionEvent {
  type: TaskEventType;
  seq: number;
  step?: string;
  attempt?: number;
  reason?: string;
  status?: TaskStatus;
  /** What a waiting step waits until (epoch ms; decision 0019). */
  until?: number;
  /** The signal a step waits for, or that was received (decision 0019). */
  signal?: string;
  /** The fan-out element the event is about (its index; decision 0019 §4). */
  item?: number;
}

/** A step the transition started: the caller must send its request to the agent. */
export interface Dispatch {
  step: string;
  agent: string;
  kind: 'run' | 'compensate';
  attempt: number;
  completeBy: number;
  needs: string[];
  /** For a compensation: what is known of the run's effect (decision 0009). */
  effect?: 'applied' | 'unknown';
  /** A fan-out element (decision 0019 §4): its index, and how many elements the step has. */
  item?: number;
  count?: number;
  /**
   * A child step (decision 0019 §5.2): not a request to an agent but an operation on its child task —
   * `start`, `cancel` or `undo` — for the child `childId`; `sent` counts the step's operations sent so far
   * (a re-send's message id differs from the first's).
   */
  child?: ChildOp;
  childId?: string;
  sent?: number;
}

/** An operation a child step makes on its child task (decision 0019 §5.2). */
export type ChildOp = 'start' | 'cancel' | 'undo';

/** The key under which a transition carries a child step's input, when it is not the whole task input. */
export function childInputKey(step: string): string {
  return `=${step}`;
}

/** The key under which a transition carries a fan-out element's value (`Transition.outputs`). */
export function elementValueKey(step: string, item: number): string {
  return `=${step}#${item}`;
}

/** The key under which a transition carries a fan-out element's own output (for its compensation). */
export function elementOutputKey(step: string, item: number): string {
  return `${step}#${item}`;
}

/** A phase waiting for a permit, as a transition hands it to its agent type's limiter (decision 0020 §2.2): the limiter's queue item. */
export type QueuedPhase = QueueItem;

/** What a transition asks of the limiters, per agent type (decision 0020 §2.5): absent when nothing. */
export type LimiterRequests = Map<string, { queue: QueuedPhase[]; release: string[]; dequeue: string[]; pause?: { key: string | undefined; until: number }[] }>;

interface RawQueueItem {
  t: string;
  task: string;
  s: string;
  c: 'run' | 'compensate';
  k: string;
  p: number;
  f: number;
  b: number;
}

/** The `limiter` field of a transition's reply (JSON from Lua; cjson writes an empty list as {}). */
export function parseLimiter(raw: unknown): LimiterRequests | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const out: LimiterRequests = new Map();
  for (const [agent, v] of Object.entries(raw as Record<string, { queue?: unknown; release?: unknown; dequeue?: unknown; pause?: unknown }>)) {
    const queue = asArray<RawQueueItem>(v.queue).map((q) => ({ ticket: q.t, taskId: q.task, phase: q.s, kind: q.c, key: typeof q.k === 'string' ? q.k : '', priority: Number(q.p), firstAt: Number(q.f), budgetMs: Number(q.b) }));
    const pause = asArray<{ k?: unknown; u: number }>(v.pause).map((p) => ({ key: typeof p.k === 'string' ? p.k : undefined, until: Number(p.u) }));
    out.set(agent, { queue, release: asArray<string>(v.release), dequeue: asArray<string>(v.dequeue), ...(pause.length > 0 ? { pause } : {}) });
  }
  return out.size > 0 ? out : undefined;
}

export interface Transition {
  /** The pinned workflow of the task. */
  workflow: string;
  version: number;
  /** The client that submitted the task: its events go out under it (decision 0010). */
  client: string;
  lockEpoch: number;
  status: TaskStatus;
  replyTo?: string;
  events: TransitionEvent[];
  dispatch: Dispatch[];
  /** The task input (msgpack), present when something is dispatched. */
  input?: Uint8Array;
  /**
   * Outputs (msgpack) of the steps the dispatched steps need; for fan-out elements also each element's
   * value (`elementValueKey`) and, for an element's compensation, its own output (`elementOutputKey`).
   */
  outputs: Map<string, Uint8Array>;
  /** When the task was created (epoch ms), for its duration once it ends. */
  createdAt?: number;
  /** What the transition asks of the agent types' limiters (decision 0020); absent when nothing. */
  limiter?: LimiterRequests;
  /**
   * Tasks of the same client and bucket that the transition admitted (decision 0024): the caller starts each
   * with admitTask (else the supervisor does, once its `#admit` member falls due). Absent when none.
   */
  admit?: string[];
}

/** cjson encodes an empty Lua table as {}; arrays from Lua go through here. */
export function asArray<T>(v: unknown): T[] {
  return Array.isArray(v) ? (v as T[]) : [];
}

interface RawBody {
  workflow?: string;
  version?: number;
  client?: string;
  lockEpoch?: number;
  status?: TaskStatus;
  replyTo?: string;
  events?: unknown;
  dispatch?: unknown;
  reason?: string;
  createdAt?: number;
  limiter?: unknown;
  admit?: unknown;
}

export function parseBody(raw: unknown): RawBody {
  if (!Buffer.isBuffer(raw)) return {};
  return JSON.parse(raw.toString('utf8')) as RawBody;
}

export function parseTransition(reply: unknown[]): Transition {
  const body = parseBody(reply[1]);
  const outputs = new Map<string, Uint8Array>();
  for (let i = 3; i + 1 < reply.length; i += 2) {
    outputs.set(String(reply[i]), reply[i + 1] as Buffer);
  }
  const dispatch = asArray<Dispatch>(body.dispatch).map(parseDispatch);
  const t: Transition = {
    workflow: body.workflow ?? '',
    version: body.version ?? 0,
    client: body.client ?? DEFAULT_CLIENT_ID,
    lockEpoch: body.lockEpoch ?? 0,
    status: body.status ?? 'running',
    events: asArray<TransitionEvent>(body.events),
    dispatch,
    outputs,
  };
  if (body.replyTo) t.replyTo = body.replyTo;
  if (typeof body.createdAt === 'number') t.createdAt = body.createdAt;
  const limiter = parseLimiter(body.limiter);
  if (limiter) t.limiter = limiter;
  const admit = asArray<string>(body.admit);
  if (admit.length > 0) t.admit = admit;
  if (Buffer.isBuffer(reply[2])) t.input = reply[2];
  return t;
}

/** A dispatch as Lua encodes it: an empty `needs` arrives as {}, a run's `effect` is absent or 'none'. */
function parseDispatch(d: Dispatch): Dispatch {
  const out: Dispatch = { step: d.step, agent: d.agent, kind: d.kind ?? 'run', attempt: d.attempt, completeBy: d.completeBy, needs: asArray<string>(d.needs) };
  if (out.kind === 'compensate') out.effect = d.effect === 'applied' ? 'applied' : 'unknown';
  if (typeof d.item === 'number') {
    out.item = d.item;
    out.count = d.count ?? 0;
  }
  if (d.child === 'start' || d.child === 'cancel' || d.child === 'undo') {
    out.child = d.child;
    out.childId = d.childId ?? '';
    out.sent = d.sent ?? 0;
    delete out.effect;
  }
  return out;
}

/** The wire event for a transition's event. */
export function toTaskEvent(taskId: string, e: TransitionEvent, at: number): TaskEvent {
  const ev: TaskEvent = { taskId, seq: e.seq, type: e.type, at };
  if (e.status) ev.status = e.status;
  if (e.step) ev.step = e.step;
  if (e.attempt) ev.attempt = e.attempt;
  if (e.reason) ev.reason = e.reason.slice(0, 4000);
  if (typeof e.until === 'number') ev.until = e.until;
  if (typeof e.signal === 'string') ev.signal = e.signal;
  if (typeof e.item === 'number') ev.item = e.item;
  return ev;
}

/**
 * What the supervisor's transition did: a new attempt (retry), a park, a give-up that ended the task
 * with an alert (error) or began its undo (compensate), a step in flight during an undo abandoned
 * (abandon), a sleep that ended and the steps it made ready started (wake, decision 0019), or nothing (noop).
 */
export type ExpireAction = 'retry' | 'park' | 'error' | 'compensate' | 'abandon' | 'wake' | 'requeue' | 'resend' | 'timeout' | 'admit' | 'noop';
// (requeue: a phase waiting for a limit was checked, decision 0020 Q7: its queue item is in `limiter`;
// resend / timeout: a child step's check re-sent its current operation, or cancelled its child, decision 0019 §5.3)
// (a wait that timed out gives up: 'error' or 'compensate', as any give-up)

export interface Expiry {
  action: ExpireAction;
  /** Whether the expired step was running or being compensated. */
  kind: 'run' | 'compensate';
  events: TransitionEvent[];
  dispatch: Dispatch[];
  attempt?: number;
  replyTo?: string;
  /** The task's submitting client (its events' subject). */
  client: string;
  failureCount?: number;
  lastError?: string;
  /** The task's workflow and when it was created (epoch ms): for the metrics of a task that ended. */
  workflow?: string;
  createdAt?: number;
  /** What the transition asks of the limiters (queue items go out as queue_step commands; decision 0020). */
  limiter?: LimiterRequests;
  /** Tasks the transition admitted (decision 0024): the supervisor starts them with admitTask. */
  admit?: string[];
}

export function parseExpiry(raw: unknown): Expiry {
  const b = (Buffer.isBuffer(raw) ? JSON.parse(raw.toString('utf8')) : {}) as Omit<Partial<Expiry>, 'limiter' | 'admit'> & { events?: unknown; dispatch?: unknown; limiter?: unknown; admit?: unknown };
  const e: Expiry = {
    action: b.action ?? 'noop',
    kind: b.kind ?? 'run',
    client: b.client ?? DEFAULT_CLIENT_ID,
    events: asArray<TransitionEvent>(b.events),
    dispatch: asArray<Dispatch>(b.dispatch).map(parseDispatch),
  };
  if (b.attempt !== undefined) e.attempt = b.attempt;
  if (b.replyTo) e.replyTo = b.replyTo;
  if (b.failureCount !== undefined) e.failureCount = b.failureCount;
  if (b.lastError) e.lastError = b.lastError;
  if (typeof b.workflow === 'string') e.workflow = b.workflow;
  if (typeof b.createdAt === 'number') e.createdAt = b.createdAt;
  const limiter = parseLimiter(b.limiter);
  if (limiter) e.limiter = limiter;
  const admit = asArray<string>(b.admit);
  if (admit.length > 0) e.admit = admit;
  return e;
}
