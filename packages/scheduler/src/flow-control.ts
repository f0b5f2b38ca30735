/**
 * Flow control at dispatch, the scheduler's part (decision 0020 §2.5): what a transition asks of the
 * agent types' limiters (queue, release, dequeue) goes to each limiter before the message that caused
 * it is acknowledged; the grants a limiter answers are started — each under its own task's lease, not
 * awaited by the handler that caused them — with startQueued; a limiter's wakeAt arms one timer per
 * agent type that pumps its grant loop. Nothing here is state a crash can lose: a lost ticket is re-sent
 * by the phase's check, a lost start by the check or the permit's lapse, a lost timer by the leader
 * supervisor's pump_limit.
 */
import {
  ErrorCode,
  TriadError,
  agentLimitProblems,
  errorMessage,
  type AgentLimit,
  type AgentLimitClearReply,
  type AgentLimitListRequest,
  type AgentLimitSetReply,
  type AgentLimitStatus,
  type RegisteredWorkflow,
  type StoredAgentLimit,
} from '@triad/protocol';
import { silentLogger, type Logger } from '@triad/telemetry';
import type { LimitMetrics } from './telemetry.js';
import type { Grant, LeaseClaim, LimitCache, LimitConfig, LimiterOps, LimiterReply, LimiterRequests, LimitStore, QueuedPhase, RegistryEntry, TaskStore, Transition } from '@triad/store';

/** How long a grant's start is tried again while another process holds its task's lease (then the check recovers it). */
const START_RETRY_MS = 1_000;

export interface FlowControlOptions {
  tasks: TaskStore;
  limits: LimitStore;
  schedulerId: string;
  withTaskLease: <T>(taskId: string, fn: (lease: LeaseClaim) => Promise<T>) => Promise<T | { nakDelayMs: number }>;
  workflow: (name: string, version: number) => Promise<RegisteredWorkflow | undefined>;
  publish: (taskId: string, wf: RegisteredWorkflow, t: Transition, now: number) => Promise<void>;
  log?: Logger;
  /** Grants, waits and reclaimed permits (decision 0020 §6's metrics). */
  metrics?: LimitMetrics;
}

export class FlowControl {
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly starting = new Set<Promise<void>>();
  private readonly log: Logger;
  private stopped = false;

  constructor(private readonly o: FlowControlOptions) {
    this.log = o.log ?? silentLogger;
  }

  private get cache(): LimitCache | undefined {
    return this.o.tasks.limits;
  }

  /** A transition's limiter requests, one limiter script per agent type (in parallel: different slots). */
  async apply(requests: LimiterRequests | undefined): Promise<void> {
    if (!requests) return;
    await Promise.all(
      [...requests].map(([agent, r]) => {
        // A throttle pauses the agent type, or only the step's key when its limit says pausePerKey (§5.4).
        const e = this.cache?.entry(agent);
        const perKey = e !== undefined && 'pausePerKey' in e && e.pausePerKey === true;
        const pause = (r.pause ?? []).map((p) => (perKey && p.key !== undefined ? { key: p.key, until: p.until } : { until: p.until }));
        return this.call(agent, {
          ...(r.release.length > 0 ? { release: r.release.map((ticket) => ({ ticket })) } : {}),
          ...(r.dequeue.length > 0 ? { dequeue: r.dequeue } : {}),
          ...(pause.length > 0 ? { pause } : {}),
          ...(r.queue.length > 0 ? { queue: r.queue } : {}),
        });
      }),
    );
  }

  /**
   * Before a throttled result is applied (decision 0020 §1.5): an agent type with no limit gets a
   * pause-only limiter until the service's Retry-After, in the registry and at once in this process's
   * table, so the transition puts the step back in line there rather than parking it.
   */
  async beforeThrottle(agent: string, until: number): Promise<void> {
    const cache = this.cache;
    if (!cache || cache.isLimited(agent, Date.now())) return;
    await this.o.limits.registerPause(agent, until);
    cache.notePause(agent, until);
  }

  /** Permits to free (a stale result's, decision 0020 Q12). */
  async release(list: readonly { agent: string; ticket: string }[]): Promise<void> {
    const byAgent = new Map<string, string[]>();
    for (const r of list) byAgent.set(r.agent, [...(byAgent.get(r.agent) ?? []), r.ticket]);
    await Promise.all([...byAgent].map(([agent, tickets]) => this.call(agent, { release: tickets.map((ticket) => ({ ticket })) })));
  }

  /** A queued phase's ticket, (re)sent to its limiter (a queue_step command, a redelivery). */
  async queue(agent: string, item: QueuedPhase): Promise<void> {
    await this.call(agent, { queue: [item] });
  }

  /** Runs an agent type's grant loop (its timer fired, or the supervisor's pump_limit). */
  async pump(agent: string): Promise<void> {
    this.handle(agent, await this.o.limits.pump(agent, Date.now()));
  }

  /** Sets, lists and clears limits (the `agentLimit.*` API, operator only). */
  async set(l: AgentLimit, warnings: string[]): Promise<AgentLimitSetReply> {
    const problems = agentLimitProblems(l);
    if (problems.length > 0) throw new TriadError(ErrorCode.InvalidMessage, problems.map((p) => p.message).join('; '), { details: problems.map((p) => `${p.path}: ${p.message}`) });
    const now = Date.now();
    const before = (await this.o.limits.entries()).get(l.agent)?.entry;
    const config = toConfig(l);
    if (l.perKeyConcurrency !== undefined && l.concurrency !== undefined && l.perKeyConcurrency > l.concurrency) {
      warnings.push(`--per-key-concurrency ${l.perKeyConcurrency} is above --concurrency ${l.concurrency}: the per-key limit never binds`);
    }
    this.handle(l.agent, await this.o.limits.set(l.agent, config, now));
    this.cache?.expire();
    const previous = before ? fromEntry(l.agent, before) : undefined;
    this.log.info({ agent: l.agent, limit: config, previous }, 'dispatch limit set');
    return { limit: { ...l, setAt: now }, ...(previous ? { previous } : {}), warnings };
  }

  /** The agent types with a limit set (not pause-only, not draining), from the registry. */
  async limitedAgents(): Promise<Set<string>> {
    const entries = await this.o.limits.entries();
    return new Set([...entries].filter(([, e]) => !('draining' in e.entry) && !('pausedUntil' in e.entry)).map(([agent]) => agent));
  }

  async list(q: AgentLimitListRequest): Promise<AgentLimitStatus[]> {
    const entries = await this.o.limits.entries();
    const now = Date.now();
    const agents = [...entries.keys()].filter((a) => q.agent === undefined || a === q.agent).sort();
    return Promise.all(
      agents.map(async (agent): Promise<AgentLimitStatus> => {
        const e = (entries.get(agent) as { entry: RegistryEntry }).entry;
        const s = await this.o.limits.stats(agent, now, q.keys ?? 0);
        const limit = fromEntry(agent, e);
        return {
          agent,
          ...(limit ? { limit } : {}),
          inFlight: s.inFlight,
          waiting: s.waiting,
          ...(s.oldestWaitMs !== undefined ? { oldestWaitMs: s.oldestWaitMs } : {}),
          ratePerSecondNow: s.ratePerSecondNow,
          ...(s.pausedUntil !== undefined ? { pausedUntil: s.pausedUntil } : 'pausedUntil' in e && e.pausedUntil > now ? { pausedUntil: e.pausedUntil } : {}),
          ...('draining' in e ? { draining: true } : {}),
          ...((q.keys ?? 0) > 0 ? { keys: s.keys.map((k) => ({ key: k.key, inFlight: k.inFlight, waiting: k.waiting, ...(k.oldestWaitMs !== undefined ? { oldestWaitMs: k.oldestWaitMs } : {}), ...(k.pausedUntil !== undefined ? { pausedUntil: k.pausedUntil } : {}), ...(k.blockedUntil !== undefined ? { blockedUntil: k.blockedUntil } : {}) })) } : {}),
        };
      }),
    );
  }

  async clear(agent: string): Promise<AgentLimitClearReply> {
    const { cleared, reply } = await this.o.limits.clear(agent, Date.now());
    this.cache?.expire();
    this.handle(agent, reply);
    this.log.info({ agent, cleared, waiting: reply.waiting }, 'dispatch limit cleared');
    return { agent, cleared, waiting: reply.waiting };
  }

  /** Stops the timers and waits for the starts under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    await Promise.allSettled([...this.starting]);
  }

  private async call(agent: string, ops: LimiterOps): Promise<void> {
    this.handle(agent, await this.o.limits.apply(agent, ops, Date.now()));
  }

  /** A limiter's reply: its grants started (not awaited), its wakeAt armed. */
  private handle(agent: string, reply: LimiterReply): void {
    this.o.metrics?.reply(agent, reply.grants.length, reply.reclaimed ?? 0);
    for (const g of reply.grants) {
      const p = this.start(agent, g).catch((e: unknown) => this.log.warn({ err: errorMessage(e), agent, ticket: g.ticket }, 'a granted step was not started; its check or the permit lapse recovers it'));
      this.starting.add(p);
      void p.finally(() => this.starting.delete(p));
    }
    if (reply.wakeAt !== undefined) this.arm(agent, reply.wakeAt);
  }

  /** Starts a grant under its task's lease (Q4); refused as late (Q10) or stale (Q11), frees what must be freed. */
  private async start(agent: string, g: Grant): Promise<void> {
    const until = Date.now() + START_RETRY_MS;
    for (;;) {
      if (this.stopped) return;
      const out = await this.o.withTaskLease(g.taskId, async (lease) => {
        const now = Date.now();
        const r = await this.o.tasks.startQueued({ lease, taskId: g.taskId, phase: g.phase, kind: g.kind, ticket: g.ticket, completeBy: g.completeBy, now, schedulerId: this.o.schedulerId });
        if (r.started) {
          const wf = await this.o.workflow(r.transition.workflow, r.transition.version);
          if (!wf) throw new Error(`workflow ${r.transition.workflow} v${r.transition.version} of task ${g.taskId} is not registered`);
          await this.o.publish(g.taskId, wf, r.transition, now);
        }
        return r;
      });
      if ('nakDelayMs' in out) {
        if (Date.now() >= until) return; // the phase's check re-sends the ticket; the limiter returns its live grant
        await new Promise((r) => setTimeout(r, out.nakDelayMs));
        continue;
      }
      if (out.started) {
        this.o.metrics?.started(agent, g.waitedMs);
        return;
      }
      if (out.why === 'late') await this.call(agent, { release: [{ ticket: g.ticket, requeue: true }] });
      else if (out.why === 'gone' || (out.why === 'stale' && out.release)) await this.call(agent, { release: [{ ticket: g.ticket }] });
      return;
    }
  }

  /** One timer per agent type, at the earliest wakeAt it was told. */
  private arm(agent: string, at: number): void {
    if (this.stopped) return;
    const current = this.timers.get(agent);
    if (current && current.at <= at) return;
    if (current) clearTimeout(current.timer);
    const timer = setTimeout(() => {
      this.timers.delete(agent);
      this.pump(agent).catch((e: unknown) => this.log.warn({ err: errorMessage(e), agent }, 'limiter pump failed; the supervisor pumps it when its wake time is overdue'));
    }, Math.max(0, at - Date.now()));
    timer.unref?.();
    this.timers.set(agent, { at, timer });
  }
}

/** The store's limit from the wire's (`key` is `input.<path>`). */
export function toConfig(l: AgentLimit): LimitConfig {
  const c: LimitConfig = {};
  if (l.concurrency !== undefined) c.concurrency = l.concurrency;
  if (l.ratePerSecond !== undefined) c.ratePerSecond = l.ratePerSecond;
  if (l.burst !== undefined) c.burst = l.burst;
  if (l.key !== undefined) c.key = l.key.split('.').slice(1);
  if (l.perKeyConcurrency !== undefined) c.perKeyConcurrency = l.perKeyConcurrency;
  if (l.perKeyRatePerSecond !== undefined) c.perKeyRatePerSecond = l.perKeyRatePerSecond;
  if (l.perKeyBurst !== undefined) c.perKeyBurst = l.perKeyBurst;
  if (l.pausePerKey) c.pausePerKey = true;
  return c;
}

/** A registry entry as the API shows it (undefined for pause-only and draining entries). */
export function fromEntry(agent: string, e: RegistryEntry): StoredAgentLimit | undefined {
  if ('draining' in e || 'pausedUntil' in e) return undefined;
  const { key, setAt, ...rest } = e;
  const out: StoredAgentLimit = { agent, setAt };
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  if (key) out.key = `input.${key.join('.')}`;
  return out;
}
