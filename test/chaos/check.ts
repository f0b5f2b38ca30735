// The chaos run's verdict: a pure function of the services' ledgers, the tasks' final states and the
// bounds, so each rule is tested on hand-made ledgers (check.test.ts) as well as on real runs.
import { isTerminal, type TaskState, type TaskStatus, type WorkflowDefinition } from '@triad/protocol';
import type { Effect } from '@triad/example-orders';

export interface CheckInput {
  namespace: string;
  definition: WorkflowDefinition;
  /** Task ids whose submission JetStream acknowledged. */
  accepted: readonly string[];
  /**
   * Task ids whose submission failed (not acknowledged). Not counted as lost, but the submission may
   * have been stored anyway (a lost ack), so their ledger keys are not foreign and, when the task
   * exists, it is checked like any other.
   */
  unacknowledged: readonly string[];
  /** The last state read of every known task id (accepted or not); absent = never found. */
  states: ReadonlyMap<string, TaskState>;
  /** Every service's ledger (`effects()`), by service name. */
  ledgers: Readonly<Record<string, readonly Effect[]>>;
  /** taskBound(definition, supervision).totalMs. */
  boundMs: number;
  /** Documented slack for message delivery on top of the bound. */
  allowanceMs: number;
  /** When the faults had stopped (services healed, processes resumed, counts restored). */
  faultsStoppedAt: number;
}

/** A few offending keys or task ids per class, so a failing run says where to look. */
const EXAMPLES = 5;

export interface Verdict {
  tasks: number;
  not_accepted: number;
  /** Unacknowledged submissions that were stored and ran anyway (checked like accepted ones). */
  not_accepted_but_ran: number;
  terminal: number;
  /** By status; a status this version does not know is counted under its own name. */
  status: Partial<Record<string, number>>;
  lost: number;
  duplicate_effects: number;
  duplicate_detail: { applied_twice: number; undone_twice: number; foreign_keys: number; foreign_undos: number; multi_key: number };
  orphan_effects: number;
  /** The Triad step status of each orphan's step: tells an abandoned in-flight step from a lost compensation. */
  orphan_step_status: Record<string, number>;
  wrong_undos: number;
  /** Effects still applied on tasks that ended failed or compensation_failed: an operator's alert covers them. */
  left_for_operator: number;
  unbounded: number;
  /** The longest a task took, createdAt to finishedAt. */
  max_task_ms: number;
  /** The latest a task became terminal after the faults stopped (0 if all ended before): what the bound limits. */
  max_after_faults_stopped_ms: number;
  /** Applies the services refused because the key's undo came first (the tombstone contract at work). */
  late_applies_refused: number;
  /** Fan-out steps (task and step) whose elements applied effects under more than one element key: several lines shipped. */
  fan_outs_with_several_elements: number;
  /** Apply requests answered as duplicates (retries of one idempotency key): expected, not a fault. */
  duplicate_calls: number;
  examples: { lost: string[]; duplicate: string[]; orphan: string[]; wrong_undo: string[]; unbounded: string[] };
}

const COUNTED_UNDO: readonly string[] = ['cancelled', 'compensated'] satisfies TaskStatus[];
const OPERATOR: readonly string[] = ['failed', 'compensation_failed'] satisfies TaskStatus[];

export function check(input: CheckInput): Verdict {
  const { namespace, definition } = input;
  const stepsByService = new Map<string, Set<string>>();
  for (const s of definition.steps) {
    if (s.agent === undefined) continue;
    const set = stepsByService.get(s.agent) ?? new Set<string>();
    set.add(s.name);
    stepsByService.set(s.agent, set);
  }
  const compensable = definition.steps.filter((s) => s.compensate !== undefined);
  // A fan-out step's effects are its elements', each under <ns>/<task>/<step>/<index> (decision 0019 §4).
  const fanOut = new Set(definition.steps.filter((s) => s.forEach !== undefined).map((s) => s.name));
  /** "<task>/<step>" -> the run keys' ledger entries of that step (one, or one per element). */
  const runEntries = new Map<string, Effect[]>();
  const known = new Set([...input.accepted, ...input.unacknowledged]);
  const examples: Verdict['examples'] = { lost: [], duplicate: [], orphan: [], wrong_undo: [], unbounded: [] };
  const note = (list: string[], what: string): void => {
    if (list.length < EXAMPLES) list.push(what);
  };

  // Tasks: terminal, lost, bounded.
  const status: Verdict['status'] = {};
  let terminal = 0;
  let lost = 0;
  let unbounded = 0;
  let maxTask = 0;
  let maxAfterFaults = 0;
  for (const id of input.accepted) {
    const s = input.states.get(id);
    const key = s?.status ?? 'not_found';
    status[key] = (status[key] ?? 0) + 1;
    if (!s || !isTerminal(s.status)) {
      lost++;
      note(examples.lost, `${id}: ${key}`);
      continue;
    }
    terminal++;
    const finishedAt = s.finishedAt ?? s.updatedAt;
    const after = finishedAt - Math.max(s.createdAt, input.faultsStoppedAt);
    maxTask = Math.max(maxTask, finishedAt - s.createdAt);
    maxAfterFaults = Math.max(maxAfterFaults, finishedAt - input.faultsStoppedAt);
    if (after > input.boundMs + input.allowanceMs) {
      unbounded++;
      note(examples.unbounded, `${id}: ${s.status} ${after} ms after max(createdAt, faultsStoppedAt)`);
    }
  }
  const ranAnyway = input.unacknowledged.filter((id) => input.states.has(id));

  // Ledger entries: every key must be the run key of a known task's step that this service serves.
  const detail: Verdict['duplicate_detail'] = { applied_twice: 0, undone_twice: 0, foreign_keys: 0, foreign_undos: 0, multi_key: 0 };
  const byKey = new Map<string, { service: string; effect: Effect }>();
  const appliedKeysOf = new Map<string, Set<string>>(); // "<task>/<step>" -> "<service> <key>"
  let lateApplies = 0;
  let duplicateCalls = 0;
  for (const [service, effects] of Object.entries(input.ledgers)) {
    const owned = stepsByService.get(service) ?? new Set<string>();
    for (const e of effects) {
      lateApplies += e.lateApplies;
      duplicateCalls += Math.max(0, e.calls - 1);
      const parts = e.idempotencyKey.split('/');
      const [ns, taskId, step, element] = parts;
      const isElement = parts.length === 4 && step !== undefined && fanOut.has(step) && /^\d+$/.test(element ?? '');
      if (e.applied && ns === namespace && taskId !== undefined && step !== undefined) {
        // One group per step, or per element of a fan-out step: each must be applied under one key.
        const group = isElement ? `${taskId}/${step}/${element ?? ''}` : `${taskId}/${step}`;
        const set = appliedKeysOf.get(group) ?? new Set<string>();
        set.add(`${service} ${e.idempotencyKey}`);
        appliedKeysOf.set(group, set);
      }
      if (byKey.has(e.idempotencyKey)) {
        if (e.applied) {
          detail.applied_twice++;
          note(examples.duplicate, `${e.idempotencyKey}: applied on ${byKey.get(e.idempotencyKey)!.service} and on ${service}`);
        }
      } else {
        byKey.set(e.idempotencyKey, { service, effect: e });
      }
      if (e.reversals > 1) {
        detail.undone_twice++;
        note(examples.duplicate, `${service} ${e.idempotencyKey}: reverted ${e.reversals} times`);
      }
      const isRunKey = (parts.length === 3 ? step !== undefined && !fanOut.has(step) : isElement) && ns === namespace && taskId !== undefined && known.has(taskId) && step !== undefined && owned.has(step);
      if (isRunKey) {
        const at = `${taskId}/${step}`;
        runEntries.set(at, [...(runEntries.get(at) ?? []), e]);
      } else {
        detail.foreign_keys++;
        note(examples.duplicate, `${service} ${e.idempotencyKey}: not the run key of a submitted task's step served by ${service}`);
      }
      if (e.undone && e.undoneBy !== `${e.idempotencyKey}/compensate`) {
        detail.foreign_undos++;
        note(examples.duplicate, `${service} ${e.idempotencyKey}: undone by ${String(e.undoneBy)}, not by its compensation key`);
      }
    }
  }
  for (const [group, keys] of appliedKeysOf) {
    if (keys.size > 1) {
      detail.multi_key++;
      note(examples.duplicate, `${group}: applied under ${[...keys].join(', ')}`);
    }
  }
  const duplicates = detail.applied_twice + detail.undone_twice + detail.foreign_keys + detail.foreign_undos + detail.multi_key;

  // Undo completeness: a task reported undone has no applied effect left on a step that can be undone,
  // and a completed task had nothing undone.
  let orphans = 0;
  let wrongUndos = 0;
  let leftForOperator = 0;
  const orphanStepStatus: Record<string, number> = {};
  for (const id of [...input.accepted, ...ranAnyway]) {
    const s = input.states.get(id);
    if (!s || !isTerminal(s.status)) continue;
    for (const step of definition.steps) {
      for (const entry of runEntries.get(`${id}/${step.name}`) ?? []) {
        if (s.status === 'completed' && entry.undone) {
          wrongUndos++;
          note(examples.wrong_undo, `${entry.idempotencyKey}: ${entry.tombstone ? 'tombstone' : 'undone'} although the task completed`);
        }
      }
    }
    for (const step of compensable) {
      for (const entry of runEntries.get(`${id}/${step.name}`) ?? []) {
        if (!entry.applied || entry.undone) continue;
        if (COUNTED_UNDO.includes(s.status)) {
          orphans++;
          const stepStatus = s.steps.find((x) => x.name === step.name)?.status ?? 'unknown';
          orphanStepStatus[stepStatus] = (orphanStepStatus[stepStatus] ?? 0) + 1;
          note(examples.orphan, `${entry.idempotencyKey}: applied, never undone; task ${s.status}, step ${stepStatus}`);
        } else if (OPERATOR.includes(s.status)) {
          leftForOperator++;
        }
      }
    }
  }

  return {
    tasks: input.accepted.length,
    not_accepted: input.unacknowledged.length,
    not_accepted_but_ran: ranAnyway.length,
    terminal,
    status,
    lost,
    duplicate_effects: duplicates,
    duplicate_detail: detail,
    orphan_effects: orphans,
    orphan_step_status: orphanStepStatus,
    wrong_undos: wrongUndos,
    left_for_operator: leftForOperator,
    unbounded,
    max_task_ms: maxTask,
    max_after_faults_stopped_ms: maxAfterFaults,
    late_applies_refused: lateApplies,
    fan_outs_with_several_elements: [...runEntries].filter(([at, entries]) => fanOut.has(at.slice(at.indexOf('/') + 1)) && entries.filter((e) => e.applied).length > 1).length,
    duplicate_calls: duplicateCalls,
    examples,
  };
}

/** The run passes only when nothing was lost, applied or undone twice, left behind by an undo, or late. */
export function passed(v: Pick<Verdict, 'lost' | 'duplicate_effects' | 'orphan_effects' | 'unbounded'>): boolean {
  return v.lost === 0 && v.duplicate_effects === 0 && v.orphan_effects === 0 && v.unbounded === 0;
}

/** What the limits lane saw (decision 0020 §9.4): the payment service's own count, the limiter's after the calm phase. */
export interface LimitsInput {
  concurrency: number;
  /** The payment service's most calls held at once over the run (its /stats). */
  maxInFlight: number;
  /** `triad limits list` for payment once every task ended: live permits and waiting steps. */
  inFlightAfter: number;
  waitingAfter: number;
  /** The tasks' final states: a task failed by a throttle counts against the lane. */
  states: ReadonlyMap<string, TaskState>;
}

export interface LimitsVerdict {
  concurrency: number;
  max_in_flight: number;
  in_flight_after: number;
  waiting_after: number;
  failed_by_throttle: number;
  ok: boolean;
}

/**
 * The limits lane's verdict: the service never held more than the limit, nothing was left in flight or
 * waiting once the work was done (no leaked permit, no forgotten ticket), and no task failed by a throttle.
 * (The task bound is not part of it: waiting for a limit is outside a definition's bounds, decision 0020 §5.6.)
 */
export function checkLimits(i: LimitsInput): LimitsVerdict {
  let failedByThrottle = 0;
  for (const s of i.states.values()) if ((s.status === 'failed' || s.status === 'compensation_failed') && /throttl/i.test(s.error ?? '')) failedByThrottle++;
  const v = { concurrency: i.concurrency, max_in_flight: i.maxInFlight, in_flight_after: i.inFlightAfter, waiting_after: i.waitingAfter, failed_by_throttle: failedByThrottle };
  return { ...v, ok: i.maxInFlight <= i.concurrency && i.inFlightAfter === 0 && i.waitingAfter === 0 && failedByThrottle === 0 };
}
