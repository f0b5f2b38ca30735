/**
 * The dashboard's reads and actions over the client SDK (NATS only): tasks, a task with its workflow,
 * workflows with their bounds, alerts, dead letters, the cluster's state — and the capability probe that
 * tells whether this identity holds the operator role.
 */
import type { TriadClient } from '@triad/client';
import { DEFAULT_SUPERVISION, boundMs, formatBound, formatMs, taskBound, stepKind } from '@triad/core';
import { ErrorCode, TriadError, errorMessage, type AgentLimitStatus, type RegisteredWorkflow, type SignalReply, type StepState, type TaskSummary } from '@triad/protocol';
import { gatherWaitContext } from '../explain.js';
import { placeText, type ClusterView, type ConsumerView, type DagStep, type Identity, type LimitsView, type StreamView, type TaskDetail, type WorkflowVersionView, type WorkflowView } from './view.js';

/** How long the probe waits for its operator-only request before it calls the answer unknown. */
const PROBE_TIMEOUT_MS = 5_000;
const TASK_LIST_LIMIT = 500;

export class DashboardData {
  private identity: Identity;
  /** Subjects NATS refused this connection publishing on (from the connection's error statuses). */
  private readonly denied = new Set<string>();
  private readonly definitions = new Map<string, RegisteredWorkflow>();

  constructor(readonly client: TriadClient) {
    this.identity = { namespace: client.namespace, clientId: client.clientId, canAct: false, why: 'not probed yet' };
    void this.watchPermissions();
  }

  /** The probed identity, with whose tasks the SDK reads (it switches to its own when NATS refuses the namespace's). */
  get me(): Identity {
    return { ...this.identity, reads: this.client.taskReads };
  }

  /** Records publish permission violations: a request NATS refuses otherwise just times out. */
  private async watchPermissions(): Promise<void> {
    for await (const s of this.client.bus.nc.status()) {
      if (s.type !== 'error') continue;
      const m = /permissions violation for publish to "?([^"\s]+)"?/i.exec(errorMessage(s.error));
      if (m?.[1]) this.denied.add(m[1]);
    }
  }

  /**
   * The capability probe: `alert.list` is an operator-only operation (decision 0010) and harmless. NATS
   * refusing it means this identity is not an operator (then a task read tells whose tasks it reads,
   * decision 0017); an answer means it is. No answer (no scheduler yet) leaves it unknown, and the
   * caller probes again later.
   */
  async probe(): Promise<Identity> {
    const subject = this.client.bus.names.subjects.api('alert.list');
    this.denied.delete(subject);
    const refused = new Promise<'denied'>((resolve) => {
      const timer = setInterval(() => {
        if (this.denied.has(subject)) resolve('denied');
      }, 50);
      setTimeout(() => clearInterval(timer), PROBE_TIMEOUT_MS + 100).unref();
    });
    const answered = this.client.alerts().then(
      () => 'ok' as const,
      (e: unknown) => (isPermissionDenial(e) ? ('denied' as const) : e instanceof TriadError && e.code === ErrorCode.Unavailable ? ('silent' as const) : ('ok' as const)),
    );
    const timeout = new Promise<'silent'>((r) => setTimeout(() => r('silent'), PROBE_TIMEOUT_MS).unref());
    const r = await Promise.race([answered, refused, timeout]);
    // Not an operator: one small task read settles whose tasks the SDK reads (its own, if NATS refuses the namespace's).
    if (r === 'denied') await this.client.listTasks({ limit: 1 }).catch(() => undefined);
    const base = { namespace: this.client.namespace, clientId: this.client.clientId };
    if (r === 'ok') this.identity = { ...base, canAct: true };
    else if (r === 'denied') this.identity = { ...base, canAct: false, why: `NATS does not let identity "${this.client.clientId}" publish on ${subject}: it does not hold the operator role (decision 0010)` };
    else this.identity = { ...base, canAct: false, why: `no scheduler answered ${subject} within ${PROBE_TIMEOUT_MS} ms: is a scheduler running in namespace "${this.client.namespace}"?` };
    return this.me;
  }

  /** True once the probe has an answer (either way); false while no scheduler has answered. */
  get probed(): boolean {
    return this.identity.canAct || (this.identity.why?.startsWith('NATS does not') ?? false);
  }

  /** Refuses an action this identity cannot perform, saying why (the server's guard; the page hides the buttons). */
  requireOperator(what: string): void {
    if (!this.identity.canAct) {
      throw new TriadError(ErrorCode.InvalidState, `cannot ${what}: ${this.identity.why ?? 'this dashboard does not hold the operator role'}`);
    }
  }

  /** An action's request; a NATS refusal (the identity lost or never had the role) becomes a clear error. */
  async act<T>(what: string, op: 'task.cancel' | 'task.retry' | 'dlq.replay' | 'schedule.pause' | 'schedule.resume', fn: () => Promise<T>): Promise<T> {
    this.requireOperator(what);
    const subject = op === 'dlq.replay' ? undefined : this.client.bus.names.subjects.api(op);
    if (subject) this.denied.delete(subject);
    try {
      return await fn();
    } catch (e) {
      if (subject && (this.denied.has(subject) || isPermissionDenial(e))) {
        this.identity = { ...this.identity, canAct: false, why: `NATS refused ${subject} for identity "${this.client.clientId}": it does not hold the operator role` };
        throw new TriadError(ErrorCode.InvalidState, `cannot ${what}: ${this.identity.why ?? ''}`, { cause: e });
      }
      throw e;
    }
  }

  /**
   * A signal for a task's waiting step (decision 0019 §7): an operator for any task, a client-role
   * dashboard for its own (the SDK signals on its client-scoped subject; another's task is unknown to it).
   */
  async signal(taskId: string, name: string, data: unknown, id: string | undefined): Promise<SignalReply> {
    return this.client.signal(taskId, name, data, id !== undefined ? { id } : {});
  }

  async tasks(): Promise<TaskSummary[]> {
    return this.client.listTasks({ limit: TASK_LIST_LIMIT });
  }

  /** The dispatch limits (operators: agentLimit.list), with per agent type its `keys` keys with the most waiting when asked. */
  async limits(): Promise<LimitsView> {
    if (!this.identity.canAct) return { limits: [], why: `the dispatch limits are an operator's to read (${this.identity.why ?? 'this identity is read-only'})` };
    return { limits: await this.client.agentLimits({}) };
  }

  /** One agent type's keys with the most waiting (the limits page, on a click). */
  async limitKeys(agent: string, keys: number): Promise<AgentLimitStatus | undefined> {
    this.requireOperator(`read the keys of ${agent}'s limit`);
    return (await this.client.agentLimits({ agent, keys }))[0];
  }

  async workflow(name: string, version: number): Promise<RegisteredWorkflow> {
    const key = `${name}@${version}`;
    const known = this.definitions.get(key);
    if (known) return known;
    const wf = await this.client.getWorkflow(name, version);
    this.definitions.set(key, wf);
    return wf;
  }

  async task(taskId: string): Promise<TaskDetail> {
    const task = await this.client.getTask(taskId);
    const wf = await this.workflow(task.workflow, task.version).catch(() => undefined);
    // An operator's dashboard asks the agents and supervisors what the state cannot say (a client identity may not probe).
    const context = this.identity.canAct ? await gatherWaitContext(this.client, task, Date.now()).catch(() => undefined) : undefined;
    return { task, steps: taskSteps(task.steps, wf), ...(context ? { context } : {}) };
  }

  async workflows(): Promise<WorkflowView[]> {
    const list = await this.client.listWorkflows();
    return Promise.all(
      list.map(async (w) => ({
        name: w.name,
        latest: w.latest,
        versions: await Promise.all([...w.versions].sort((a, b) => b - a).map(async (v) => versionView(await this.workflow(w.name, v)))),
      })),
    );
  }

  async cluster(): Promise<ClusterView> {
    const problems: string[] = [];
    const now = Date.now();
    const view: ClusterView = { at: now, supervisors: [], agents: [], streams: [], problems };
    try {
      const s = await this.client.supervisorStatus();
      if (s.leader) view.leader = s.leader;
      view.supervisors = s.supervisors.map((r) => ({
        id: r.supervisorId,
        leading: r.leading,
        epoch: r.epoch,
        ...(r.lastSweepAt !== undefined ? { lastSweepAt: r.lastSweepAt } : {}),
        ...(r.sweepMs !== undefined ? { sweepMs: r.sweepMs } : {}),
        expiredWaiting: r.expiredWaiting,
        at: r.at,
      }));
      const leader = s.supervisors.find((r) => r.supervisorId === s.leader?.id);
      if (leader?.lastSweepAt !== undefined) view.sweepLagMs = now - leader.lastSweepAt;
    } catch (e) {
      problems.push(`supervisor status: ${errorMessage(e)}`);
    }
    try {
      view.streams = await this.streams();
      const steps = view.streams.find((st) => st.name === this.client.bus.names.streams.steps);
      view.agents = (steps?.consumers ?? [])
        .filter((c) => c.name.startsWith('agent-'))
        .map((c) => ({ agent: c.name.slice('agent-'.length), waiting: c.waiting, inFlight: c.ackPending, pending: c.pending, ...(c.lastActive !== undefined ? { lastActive: c.lastActive } : {}) }));
    } catch (e) {
      problems.push(`stream state (needs JetStream info access to TRIAD_${this.client.namespace}_*): ${errorMessage(e)}`);
    }
    return view;
  }

  private async streams(): Promise<StreamView[]> {
    const { jsm, names } = this.client.bus;
    const out: StreamView[] = [];
    for (const name of Object.values(names.streams)) {
      const info = await jsm.streams.info(name).catch((e: unknown) => {
        if (/stream not found/i.test(errorMessage(e))) return undefined;
        throw e;
      });
      if (!info) continue;
      const consumers: ConsumerView[] = [];
      for await (const c of jsm.consumers.list(name)) {
        const last = c.delivered.last_active ?? c.ack_floor.last_active;
        consumers.push({
          name: c.name,
          pending: c.num_pending,
          ackPending: c.num_ack_pending,
          redelivered: c.num_redelivered,
          waiting: c.num_waiting,
          ...(epochOf(last) !== undefined ? { lastActive: epochOf(last) } : {}),
        });
      }
      out.push({ name, messages: info.state.messages, bytes: info.state.bytes, consumers: consumers.sort((a, b) => a.name.localeCompare(b.name)) });
    }
    return out;
  }
}

function versionView(wf: RegisteredWorkflow): WorkflowVersionView {
  const b = taskBound(wf, DEFAULT_SUPERVISION);
  return {
    name: wf.name,
    version: wf.version,
    registeredAt: wf.registeredAt,
    ...(wf.description !== undefined ? { description: wf.description } : {}),
    onFailure: wf.onFailure,
    ...(wf.deadlineMs !== undefined ? { deadlineMs: wf.deadlineMs } : {}),
    bounds: { total: formatBound(b.total, DEFAULT_SUPERVISION), run: formatBound(b.run, DEFAULT_SUPERVISION), undo: formatBound(b.undo, DEFAULT_SUPERVISION) },
    steps: wf.steps.map((s, i) => {
      const sb = b.steps[i];
      return {
        name: s.name,
        // A sleep, a wait or a child step calls no agent: its kind stands in (decision 0019).
        agent: s.agent ?? stepKind(s),
        dependsOn: s.dependsOn,
        budgetMs: s.budgetMs,
        ...(sb ? { bound: formatMs(boundMs(sb.run, DEFAULT_SUPERVISION)) } : {}),
        ...(s.compensate ? { compensation: { agent: s.compensate.agent, budgetMs: s.compensate.budgetMs, ...(sb?.compensation ? { bound: formatMs(boundMs(sb.compensation, DEFAULT_SUPERVISION)) } : {}) } } : {}),
      };
    }),
  };
}

/** A task's steps for its DAG: the definition's shape (when known) with each step's state. */
function taskSteps(states: readonly StepState[], wf: RegisteredWorkflow | undefined): DagStep[] {
  const def = new Map((wf?.steps ?? []).map((s) => [s.name, s]));
  return states.map((s) => {
    const d = def.get(s.name);
    return {
      name: s.name,
      agent: s.agent,
      dependsOn: s.dependsOn,
      budgetMs: d?.budgetMs ?? 0,
      status: s.status,
      attempt: s.attempt,
      ...(d?.compensate ? { compensation: { agent: d.compensate.agent, budgetMs: d.compensate.budgetMs } } : {}),
      ...(s.compensation ? { compensationStatus: s.compensation.finishedAt !== undefined ? 'done' : s.compensation.parked ? 'parked' : s.compensation.queue ? 'queued' : 'running' } : {}),
      ...(placeText(s.queue) !== undefined ? { place: placeText(s.queue) } : {}),
      ...(placeText(s.compensation?.queue) !== undefined ? { compensationPlace: placeText(s.compensation?.queue) } : {}),
    };
  });
}

/** JetStream's last_active: typed as nanoseconds by nats.js, sent by the server as an RFC 3339 time. */
function epochOf(v: unknown): number | undefined {
  if (typeof v === 'string') {
    const t = Date.parse(v);
    return Number.isNaN(t) || t <= 0 ? undefined : t;
  }
  if (typeof v === 'number' && v > 0) return v > 1e15 ? Math.round(v / 1e6) : v;
  return undefined;
}

/** A request NATS refused to publish: the SDK's error carries the server's "Permissions Violation for Publish". */
function isPermissionDenial(e: unknown): boolean {
  return /permissions violation for publish/i.test(errorMessage(e));
}
