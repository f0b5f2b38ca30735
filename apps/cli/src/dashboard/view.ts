/**
 * What the dashboard's server sends and its page draws: the JSON shapes of its HTTP API and the pure
 * functions both sides share (a workflow's DAG layout, a task's attempts from its events). No I/O, no
 * DOM: the server compiles it with tsc, the page's bundle includes it.
 */
import type { WaitContext } from '../waiting.js';
import type { AgentLimitStatus, Alert, StepState, TaskEvent, TaskState, TaskSummary } from '@triad/protocol';

/** Who the dashboard is on NATS and whether it may act (decision 0014: a capability probe). */
export interface Identity {
  namespace: string;
  clientId: string;
  /** True once an operator-only request went through; false when NATS refused it or none answered yet. */
  canAct: boolean;
  /** Why it cannot act, when it cannot. */
  why?: string;
  /** Whose tasks it reads: `own` once NATS confined it to its client's own (decision 0017). */
  reads?: 'all' | 'own';
}

export type TaskRow = TaskSummary;

/** One step of a workflow as the DAG draws it. */
export interface DagStep {
  name: string;
  agent: string;
  dependsOn: readonly string[];
  budgetMs: number;
  /** The step's bound (formatted), on the workflows page. */
  bound?: string;
  compensation?: { agent: string; budgetMs: number; bound?: string };
  /** The step's state in a task (task page). */
  status?: StepState['status'];
  attempt?: number;
  compensationStatus?: string;
  /** What the step waits for (decision 0021 §3.5), drawn under it on the task page. */
  waiting?: string;
  /** Waiting for a dispatch limit (decision 0020 §6): its place in line, `12` or `≤ 4,212`, drawn in its box. */
  place?: string;
  /** Its compensation's place in line, when that waits for a limit. */
  compensationPlace?: string;
}

export interface WorkflowVersionView {
  name: string;
  version: number;
  registeredAt: number;
  description?: string;
  onFailure: string;
  deadlineMs?: number;
  /** "a task ends within …" and its parts, formatted. */
  bounds: { total: string; run: string; undo: string };
  steps: DagStep[];
}

export interface WorkflowView {
  name: string;
  latest: number;
  versions: WorkflowVersionView[];
}

export interface TaskDetail {
  task: TaskState;
  steps: DagStep[];
  /** What the agents and supervisors said of its waiting steps (operators: decision 0021 §3.3); the page renders the texts. */
  context?: WaitContext;
}

export interface AttemptView {
  step: string;
  phase: 'run' | 'undo';
  attempt: number;
  agent: string;
  startedAt?: number;
  endedAt?: number;
  /** running, done, failed, retried, parked, error, abandoned. */
  outcome: string;
  error?: string;
}

export interface StreamView {
  name: string;
  messages: number;
  bytes: number;
  consumers: ConsumerView[];
}

export interface ConsumerView {
  name: string;
  /** Messages not yet delivered. */
  pending: number;
  /** Delivered, not yet acknowledged (in flight). */
  ackPending: number;
  redelivered: number;
  /** Pull requests waiting: processes consuming it now. */
  waiting: number;
  lastActive?: number;
}

export interface ClusterView {
  at: number;
  leader?: { id: string; epoch: number };
  /** How long ago the leader finished its last sweep. */
  sweepLagMs?: number;
  supervisors: { id: string; leading: boolean; epoch: number; lastSweepAt?: number; sweepMs?: number; expiredWaiting: number; at: number }[];
  /** Agent types with their step consumer: waiting pulls are agents consuming now. */
  agents: { agent: string; waiting: number; inFlight: number; pending: number; lastActive?: number }[];
  streams: StreamView[];
  /** Why a part could not be read (e.g. this identity may not read stream state). */
  problems: string[];
}

export type AlertView = Alert;

/** The snapshots the live stream (`GET /api/live?topics=…`) pushes, by topic. */
export interface LiveTopics {
  tasks: TaskRow[];
  alerts: AlertView[];
  cluster: ClusterView;
  identity: Identity;
  /** The dispatch limits as `triad limits list` shows them (decision 0020 §6); operators only. */
  limits: LimitsView;
}
export type Topic = keyof LiveTopics;
export const TOPICS: readonly Topic[] = ['tasks', 'alerts', 'cluster', 'identity', 'limits'];

/** The limits page's snapshot: each agent type's limit and what waits for it, or why it cannot be read. */
export interface LimitsView {
  limits: AgentLimitStatus[];
  /** Set when this identity may not read them (agentLimit.list is an operator's: its keys are tenants' input values). */
  why?: string;
}

/** A waiting phase's place for its DAG box: `12`, `≤ 4,212`, `granted`; undefined when it has none. */
export function placeText(q: StepState['queue'] | undefined): string | undefined {
  if (!q) return undefined;
  if (q.granted) return 'granted';
  if (q.place === undefined) return undefined;
  return `${q.placeApprox ? '≤ ' : ''}${q.place.toLocaleString('en-US')}`;
}

export const TERMINAL_TASK = new Set(['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled']);

/** A task's attempts in order, from its events (the state keeps only each step's latest attempt). */
export function attemptsFromEvents(events: readonly TaskEvent[], steps: readonly Pick<StepState, 'name' | 'agent' | 'compensation'>[]): AttemptView[] {
  const agentOf = new Map(steps.map((s) => [s.name, s]));
  const out: AttemptView[] = [];
  const open = new Map<string, AttemptView>();
  const close = (key: string, at: number, outcome: string, error?: string): void => {
    const a = open.get(key);
    if (!a) return;
    a.endedAt = at;
    a.outcome = outcome;
    if (error) a.error = error;
    open.delete(key);
  };
  const sorted = [...events].sort((a, b) => a.seq - b.seq);
  for (const ev of sorted) {
    if (!ev.step) continue;
    const s = agentOf.get(ev.step);
    const run = `run:${ev.step}`;
    const undo = `undo:${ev.step}`;
    const start = (key: string, phase: 'run' | 'undo'): void => {
      close(key, ev.at, 'superseded');
      const a: AttemptView = { step: ev.step ?? '?', phase, attempt: ev.attempt ?? 0, agent: (phase === 'run' ? s?.agent : s?.compensation?.agent) ?? '?', startedAt: ev.at, outcome: 'running' };
      out.push(a);
      open.set(key, a);
    };
    switch (ev.type) {
      case 'step_started':
        start(run, 'run');
        break;
      case 'step_done':
        close(run, ev.at, 'done');
        break;
      case 'step_failed':
        close(run, ev.at, 'failed', ev.reason ?? ev.error?.message);
        break;
      case 'step_retried':
        close(run, ev.at, 'expired', ev.reason);
        break;
      case 'step_parked':
        close(run, ev.at, 'parked', ev.reason);
        break;
      case 'step_error':
        close(run, ev.at, 'error', ev.reason);
        break;
      case 'step_abandoned':
        close(run, ev.at, 'abandoned', ev.reason);
        break;
      case 'compensation_started':
        start(undo, 'undo');
        break;
      case 'compensation_done':
        close(undo, ev.at, 'done');
        break;
      default:
        break;
    }
  }
  return out;
}

export interface DagNode {
  step: DagStep;
  x: number;
  y: number;
}

export interface DagLayout {
  nodes: DagNode[];
  edges: { from: DagNode; to: DagNode }[];
  width: number;
  height: number;
}

export const NODE_W = 180;
export const NODE_H = 58;
/** The compensation box hangs under its step. */
export const UNDO_H = 30;
const COL = NODE_W + 60;
const ROW = NODE_H + UNDO_H + 28;

/**
 * Columns by the longest dependency path to each step (so every edge points right), rows in definition
 * order within a column. A dependency on an unknown step is ignored (definitions are validated anyway).
 */
export function layoutDag(steps: readonly DagStep[]): DagLayout {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const depth = new Map<string, number>();
  const depthOf = (name: string, seen: Set<string>): number => {
    const known = depth.get(name);
    if (known !== undefined) return known;
    if (seen.has(name)) return 0;
    seen.add(name);
    const deps = (byName.get(name)?.dependsOn ?? []).filter((d) => byName.has(d));
    const d = deps.length === 0 ? 0 : 1 + Math.max(...deps.map((x) => depthOf(x, seen)));
    depth.set(name, d);
    return d;
  };
  const rows = new Map<number, number>();
  const nodes: DagNode[] = steps.map((step) => {
    const col = depthOf(step.name, new Set());
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    return { step, x: 20 + col * COL, y: 20 + row * ROW };
  });
  const at = new Map(nodes.map((n) => [n.step.name, n]));
  const edges = nodes.flatMap((to) => to.step.dependsOn.flatMap((d) => (at.has(d) ? [{ from: at.get(d) as DagNode, to }] : [])));
  const cols = Math.max(1, ...[...rows.keys()].map((c) => c + 1));
  const maxRows = Math.max(1, ...rows.values());
  return { nodes, edges, width: 40 + (cols - 1) * COL + NODE_W, height: 40 + (maxRows - 1) * ROW + NODE_H + UNDO_H };
}

/** "3 s", "4 min", "2 h" — how long ago, for lists. */
export function age(ms: number, now: number): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86_400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}
