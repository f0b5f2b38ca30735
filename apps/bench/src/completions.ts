/**
 * Cheap completion detection for many tasks: one private reply subject for a whole measurement (the
 * scheduler publishes every event of a task submitted with `replyTo` there), instead of one ordered
 * JetStream consumer per task as `client.wait()` creates.
 */
import { performance } from 'node:perf_hooks';
import type { TriadClient } from '@triad/client';
import type { TaskEvent } from '@triad/protocol';

interface Waiter {
  resolve: (at: number) => void;
  reject: (e: Error) => void;
}

const FAILURES = new Set(['failed', 'rejected', 'compensated', 'compensation_failed', 'cancelled']);

export class Completions {
  readonly subject: string;
  /** Events received so far (every type). */
  events = 0;
  private readonly waiters = new Map<string, Waiter>();
  /** Outcomes that arrived before anyone waited for them (performance.now() or the failure). */
  private readonly early = new Map<string, number | Error>();
  private readonly closeSub: () => void;
  private readonly loop: Promise<void>;

  constructor(client: TriadClient, private readonly onEvent?: (e: TaskEvent, at: number) => void) {
    const reply = client.replySubject();
    this.subject = reply.subject;
    this.closeSub = () => reply.close();
    this.loop = (async () => {
      for await (const ev of reply.events) this.handle(ev);
    })();
  }

  private handle(ev: TaskEvent): void {
    const at = performance.now();
    this.events++;
    this.onEvent?.(ev, at);
    let outcome: number | Error | undefined;
    if (ev.type === 'completed') outcome = at;
    else if (FAILURES.has(ev.type)) outcome = new Error(`task ${ev.taskId} ended ${ev.type}${ev.reason ? `: ${ev.reason}` : ''}`);
    if (outcome === undefined) return;
    const w = this.waiters.get(ev.taskId);
    if (!w) {
      this.early.set(ev.taskId, outcome);
      return;
    }
    this.waiters.delete(ev.taskId);
    if (typeof outcome === 'number') w.resolve(outcome);
    else w.reject(outcome);
  }

  /** Resolves with performance.now() at the moment the task's `completed` event arrived. */
  completion(taskId: string): Promise<number> {
    const e = this.early.get(taskId);
    if (e !== undefined) {
      this.early.delete(taskId);
      return typeof e === 'number' ? Promise.resolve(e) : Promise.reject(e);
    }
    return new Promise<number>((resolve, reject) => this.waiters.set(taskId, { resolve, reject }));
  }

  /** Task ids still awaited (for a timeout's error message). */
  pending(): string[] {
    return [...this.waiters.keys()];
  }

  async close(): Promise<void> {
    this.closeSub();
    await this.loop.catch(() => undefined);
  }
}
