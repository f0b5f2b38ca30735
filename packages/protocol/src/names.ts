/**
 * Every NATS subject, stream and consumer name, built from one namespace so that two namespaces on
 * the same NATS and Redis never see each other.
 */
import { z } from 'zod';
import { DEFAULT_CLIENT_ID, NAME_PATTERN, NAMESPACE_PATTERN, TASK_ID_PATTERN } from './constants.js';

export { DEFAULT_CLIENT_ID, NAME_PATTERN, NAMESPACE_PATTERN, TASK_ID_PATTERN };
export const NamespaceSchema = z
  .string()
  .regex(NAMESPACE_PATTERN, 'a namespace is 1-40 letters, digits, "_" or "-" (it becomes part of subjects and stream names)');

/** Names of workflows, steps and agents: safe as a NATS subject token, a Redis field and a stream-name part. */
export const NameSchema = z
  .string()
  .regex(NAME_PATTERN, 'a name starts with a letter and has at most 64 letters, digits, "_" or "-"');

/** Task ids travel as a subject token (events) and inside Redis hash tags: no dots, wildcards, braces or spaces. */
export const TaskIdSchema = z
  .string()
  .regex(TASK_ID_PATTERN, 'a task id is 1-128 letters, digits, "_", "-" or ":"');

/**
 * The name a client (or operator) identity submits and reads under: it is part of its submit, events
 * and inbox subjects, so NATS permissions can confine it to its own (decision 0010).
 */
export const ClientIdSchema = NameSchema;

export interface Names {
  readonly namespace: string;
  readonly subjects: {
    /** Submissions of one client (the scheduler reads the submitter from the subject). */
    submit(client: string): string;
    readonly submitAll: string;
    /** Step requests for one agent type. */
    step(agent: string): string;
    readonly stepAll: string;
    /** Results of one agent type (the scheduler checks each result's step belongs to that agent). */
    result(agent: string): string;
    readonly resultAll: string;
    readonly command: string;
    /** One task's events, under the client that submitted it. */
    event(client: string, taskId: string): string;
    /** One task's events, whoever submitted it (an operator's filter). */
    eventOfTask(taskId: string): string;
    readonly eventAll: string;
    /** A client's inbox prefix: its reply subjects, API replies and acks start with it. */
    inboxPrefix(client: string): string;
    readonly alert: string;
    deadLetter(source: string): string;
    readonly deadLetterAll: string;
    /** Request/reply API served by the schedulers (queue group). */
    api(op: ApiOp): string;
    /**
     * A client's own view of a task operation (decision 0017): the scheduler answers with that client's
     * tasks only, and permissions let a client identity publish only on its own (`*`: every client's).
     */
    clientApi(client: string, op: ClientScopedOp): string;
    readonly apiAll: string;
    readonly health: string;
    /** Probes of one agent type's instances (decision 0021 §3.3): core NATS, no stream. */
    probe(agent: string): string;
    /** A probe's reply subject: under the agent type, so an agent can answer only for its own type. */
    probed(agent: string, nonce: string, n: number): string;
    /** The start of every reply subject to a probe of this agent type (what its instances may answer on). */
    probedPrefix(agent: string): string;
    /** Every probe reply with this nonce (what a prober subscribes to). */
    probedOf(nonce: string): string;
    /** Every probe reply subject of the namespace. */
    readonly probedAll: string;
  };
  readonly streams: {
    readonly submit: string;
    readonly steps: string;
    readonly results: string;
    readonly commands: string;
    readonly events: string;
    readonly alerts: string;
    readonly deadLetters: string;
  };
  readonly consumers: {
    readonly scheduler: string;
    readonly results: string;
    readonly commands: string;
    agent(agent: string): string;
  };
  readonly queueGroup: string;
  /** The client a submission's subject names, or undefined when it names none (decision 0010). */
  submitter(subject: string): string | undefined;
  /** The agent type a result's subject names, or undefined when it names none (decision 0010). */
  resultAgent(subject: string): string | undefined;
  /** The operation (and, on a client-scoped subject, the client) an API subject names; undefined if none. */
  apiRequest(subject: string): ApiRequestSubject | undefined;
}

/** What an API request's subject names: the operation, and the client whose tasks only it may read. */
export interface ApiRequestSubject {
  op: ApiOp;
  client?: string;
}

export const API_OPS = [
  'workflow.register',
  'workflow.get',
  'workflow.list',
  'task.get',
  'task.list',
  'task.query',
  'task.count',
  'task.stuck',
  'task.events',
  'task.retry',
  'task.cancel',
  'task.signal',
  'alert.list',
  'supervisor.status',
  'bulk.start',
  'bulk.apply',
  'bulk.checkpoint',
  'bulk.end',
  'bulk.get',
  'bulk.list',
  'intake.set',
  'intake.clear',
  'intake.list',
  'schedule.create',
  'schedule.get',
  'schedule.list',
  'schedule.pause',
  'schedule.resume',
  'schedule.delete',
  'payload.put',
  'payload.get',
] as const;
export type ApiOp = (typeof API_OPS)[number];

/**
 * Operations that also exist scoped to one client, `triad.<ns>.api.client.<client>.<op>` (decision 0017):
 * its own tasks' reads, signals to its own tasks (decision 0019 §3.2), and its own large payloads'
 * uploads and downloads through the schedulers (decision 0021 §4, settled with 0022).
 * The token `client` after `api.` is reserved: no operation's name starts with it.
 */
export const CLIENT_SCOPED_OPS = ['task.get', 'task.list', 'task.query', 'task.count', 'task.stuck', 'task.events', 'task.signal', 'payload.put', 'payload.get'] as const satisfies readonly ApiOp[];
export type ClientScopedOp = (typeof CLIENT_SCOPED_OPS)[number];
const CLIENT_API_TOKEN = 'client';

export function names(namespace: string): Names {
  const ns = NamespaceSchema.parse(namespace);
  const p = `triad.${ns}`;
  const s = `TRIAD_${ns}`;
  return {
    namespace: ns,
    subjects: {
      submit: (client) => `${p}.submit.${client}`,
      submitAll: `${p}.submit.*`,
      step: (agent) => `${p}.step.${agent}`,
      stepAll: `${p}.step.*`,
      result: (agent) => `${p}.result.${agent}`,
      resultAll: `${p}.result.*`,
      command: `${p}.command`,
      event: (client, taskId) => `${p}.event.${client}.${taskId}`,
      eventOfTask: (taskId) => `${p}.event.*.${taskId}`,
      eventAll: `${p}.event.*.*`,
      inboxPrefix: (client) => `_INBOX.${ns}.${client}`,
      alert: `${p}.alert`,
      deadLetter: (source) => `${p}.dlq.${source}`,
      deadLetterAll: `${p}.dlq.*`,
      api: (op) => `${p}.api.${op}`,
      clientApi: (client, op) => `${p}.api.${CLIENT_API_TOKEN}.${client}.${op}`,
      apiAll: `${p}.api.>`,
      health: `${p}.health`,
      probe: (agent) => `${p}.probe.${agent}`,
      probed: (agent, nonce, n) => `${p}.probed.${agent}.${nonce}.${n}`,
      probedPrefix: (agent) => `${p}.probed.${agent}.`,
      probedOf: (nonce) => `${p}.probed.*.${nonce}.*`,
      probedAll: `${p}.probed.>`,
    },
    streams: {
      submit: `${s}_SUBMIT`,
      steps: `${s}_STEPS`,
      results: `${s}_RESULTS`,
      commands: `${s}_COMMANDS`,
      events: `${s}_EVENTS`,
      alerts: `${s}_ALERTS`,
      deadLetters: `${s}_DLQ`,
    },
    consumers: {
      scheduler: 'scheduler',
      results: 'results',
      commands: 'commands',
      agent: (agent) => `agent-${agent}`,
    },
    queueGroup: `triad-${ns}-scheduler`,
    submitter: (subject) => subjectToken(subject, `${p}.submit.`),
    resultAgent: (subject) => subjectToken(subject, `${p}.result.`),
    apiRequest: (subject) => apiRequest(subject, `${p}.api.`),
  };
}

/** Parses `<prefix><op>` or `<prefix>client.<client>.<op>` (only the client-scoped operations there). */
function apiRequest(subject: string, prefix: string): ApiRequestSubject | undefined {
  if (!subject.startsWith(prefix)) return undefined;
  const rest = subject.slice(prefix.length);
  if (rest.startsWith(`${CLIENT_API_TOKEN}.`)) {
    const [, client = '', ...op] = rest.split('.');
    const scoped = CLIENT_SCOPED_OPS.find((o) => o === op.join('.'));
    return scoped && NAME_PATTERN.test(client) ? { op: scoped, client } : undefined;
  }
  const op = API_OPS.find((o) => o === rest);
  return op ? { op } : undefined;
}

/**
 * The last token of a subject under `prefix` (`triad.<ns>.submit.` → the client, `triad.<ns>.result.` →
 * the agent type), or undefined when the subject is not under it or the token is not a name.
 */
export function subjectToken(subject: string, prefix: string): string | undefined {
  if (!subject.startsWith(prefix)) return undefined;
  const token = subject.slice(prefix.length);
  return NAME_PATTERN.test(token) ? token : undefined;
}
