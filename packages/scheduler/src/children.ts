/**
 * Child operations (decision 0019 §5.2): a child step's transitions dispatch `start`, `cancel` or `undo`
 * of its child task instead of a request to an agent. The scheduler that made the transition (or took the
 * supervisor's retry command) applies each right after it, before it acknowledges what caused it, as one
 * transition on the child's bucket under the child's own lease — never the parent's, so no two leases are
 * ever waited for in a cycle. Every operation is idempotent; one that is lost (a crash, a lease another
 * scheduler holds for long) is sent again by the parent step's check (expireStep), so none is forgotten.
 */
import { DEFAULT_SUPERVISION, childResolver, taskBound } from '@triad/core';
import { ErrorCode, errorMessage, isTriadError, type RegisteredWorkflow, type WorkflowDefinition } from '@triad/protocol';
import { childInputKey, type ChildLink, type ChildOutcome, type Dispatch, type LeaseClaim, type TaskStore, type Transition } from '@triad/store';
import type { Logger } from '@triad/telemetry';

/** How long a parent that cannot be bounded keeps its children undoable (a child workflow not registered). */
const UNBOUNDED_HOLD_MS = 30 * 24 * 3_600_000;
/** Tries of a child operation whose child's lease another scheduler holds (then the check sends it again). */
const BUSY_TRIES = 5;

type WithLease = <T>(taskId: string, fn: (lease: LeaseClaim) => Promise<T>) => Promise<T | { nakDelayMs: number }>;
type Publish = (taskId: string, wf: RegisteredWorkflow, t: Transition, now: number) => Promise<void>;

export class ChildOperations {
  /** Per parent workflow version: how long after a parent's creation its children must stay undoable. */
  private readonly holds = new Map<string, number>();

  constructor(
    private readonly tasks: TaskStore,
    private readonly schedulerId: string,
    private readonly withTaskLease: WithLease,
    private readonly publish: Publish,
    private readonly log: Logger,
  ) {}

  /**
   * Applies one child operation a transition of `parentId` dispatched, and publishes what it did to the
   * child (its events, its steps' requests, its own children's operations).
   */
  async apply(parentId: string, parent: RegisteredWorkflow, t: Transition, d: Dispatch): Promise<void> {
    const childId = d.childId ?? '';
    const spec = (await this.tasks.workflows.compiled(parent.name, parent.version))?.plan.find((p) => p.n === d.step)?.ch;
    const op = d.child;
    if (!spec || !op) return;
    const link: ChildLink = { parentId, parentStep: d.step, kind: d.kind, attempt: d.attempt, holdUntil: (t.createdAt ?? Date.now()) + (await this.holdMs(parent)) };
    for (let tries = 1; ; tries++) {
      let outcome: ChildOutcome | { nakDelayMs: number };
      try {
        outcome = await this.withTaskLease(childId, async (lease) => {
          const now = Date.now();
          if (op === 'start') {
            const child = await this.tasks.workflows.compiled(spec.w, spec.v);
            const input = spec.s === '' && !spec.p ? t.input : t.outputs.get(childInputKey(d.step));
            const common = { lease, childId, link, input: input ?? new Uint8Array([0xc0]), client: t.client, now, schedulerId: this.schedulerId };
            if (!child) {
              const reason = spec.v === undefined ? `workflow ${spec.w} is not registered` : `workflow ${spec.w} has no version ${spec.v}`;
              const r = await this.tasks.startChild({ ...common, workflow: spec.w, version: spec.v ?? 0, reason });
              if (r.applied) await this.publishEnd(childId, r.transition, now);
              return r;
            }
            const wf = child.workflow;
            const r = await this.tasks.startChild({
              ...common,
              workflow: wf.name,
              version: wf.version,
              plan: child.plan,
              planJson: child.planJson,
              onFailure: wf.onFailure,
              ...(wf.deadlineMs !== undefined ? { deadlineMs: wf.deadlineMs } : {}),
            });
            if (r.applied) await this.publish(childId, wf, r.transition, now);
            return r;
          }
          const reason = op === 'cancel' ? `its parent ${parentId} stopped waiting for it (step ${d.step})` : `its parent ${parentId} is being undone (step ${d.step})`;
          const r = await this.tasks.stopChild(op, { lease, childId, link, workflow: spec.w, client: t.client, reason, now, schedulerId: this.schedulerId });
          if (r.applied) await this.publishEnd(childId, r.transition, now);
          return r;
        });
      } catch (e) {
        if (isTriadError(e, ErrorCode.InvalidState)) {
          this.log.error({ taskId: parentId, step: d.step, childId, err: errorMessage(e) }, 'child operation refused');
          // A start refused because the id is another task's (a client chose it): the parent's step fails
          // now (childRefused), under the parent's lease — queued after the operation this one came from,
          // which may hold it, so not awaited. A cancel or an undo refused is left to the step's check.
          if (op === 'start') void this.refuseStart(parentId, parent, d, childId, errorMessage(e));
          return;
        }
        throw e;
      }
      if (!('nakDelayMs' in outcome)) {
        this.log.debug({ taskId: parentId, step: d.step, childId, op: d.child, action: outcome.action }, 'child operation applied');
        return;
      }
      if (tries >= BUSY_TRIES) {
        this.log.warn({ taskId: parentId, step: d.step, childId, op: d.child }, "child operation not applied: another scheduler holds the child's lease; the step's check sends it again");
        return;
      }
      await new Promise((r) => setTimeout(r, outcome.nakDelayMs));
    }
  }

  /** The parent's step fails for good: its child's id is taken (decision 0019 §5.2). Never throws. */
  private async refuseStart(parentId: string, parent: RegisteredWorkflow, d: Dispatch, childId: string, reason: string): Promise<void> {
    try {
      const out = await this.withTaskLease(parentId, async (lease) => {
        const now = Date.now();
        const r = await this.tasks.childRefused({ lease, taskId: parentId, step: d.step, attempt: d.attempt, childId, reason, now, schedulerId: this.schedulerId });
        if (r.applied) await this.publish(parentId, parent, r.transition, now);
        return r;
      });
      if ('nakDelayMs' in out) this.log.warn({ taskId: parentId, step: d.step, childId }, "refused child start not recorded: another scheduler holds the parent's lease; the step's check sends the start again");
      else if (out.applied) this.log.warn({ taskId: parentId, step: d.step, childId, action: out.action }, 'child step failed: its child task id is taken by another task');
    } catch (e) {
      this.log.error({ taskId: parentId, step: d.step, childId, err: errorMessage(e) }, "refused child start not recorded; the step's check sends the start again");
    }
  }

  /** Publishes a child operation's transition: under the child's pinned workflow (a tombstone or a stub has none: its latest). */
  private async publishEnd(childId: string, t: Transition, now: number): Promise<void> {
    const wf = await this.tasks.workflows.get(t.workflow, t.version > 0 ? t.version : undefined);
    if (wf) await this.publish(childId, wf, t, now);
    else this.log.warn({ taskId: childId, workflow: t.workflow }, 'child task events not published: its workflow is not registered');
  }

  /**
   * How long a parent of this workflow version may still undo its children after it was created: its
   * bound (decision 0009 §1, with its child workflows' bounds; decision 0019 §2.8), or 30 days when that
   * cannot be computed.
   */
  private async holdMs(parent: RegisteredWorkflow): Promise<number> {
    const key = `${parent.name}@${parent.version}`;
    const known = this.holds.get(key);
    if (known !== undefined) return known;
    const resolve = await childResolver(parent, async (name, version): Promise<WorkflowDefinition | undefined> => this.tasks.workflows.get(name, version));
    const b = taskBound(parent, DEFAULT_SUPERVISION, resolve);
    const ms = b.unknown ? UNBOUNDED_HOLD_MS : b.totalMs;
    this.holds.set(key, ms);
    return ms;
  }
}
