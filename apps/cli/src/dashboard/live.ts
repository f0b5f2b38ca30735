/**
 * The live snapshots the dashboard pushes: each topic (tasks, alerts, cluster, identity) is read while
 * some page listens to it, on an interval and — for tasks and alerts — at once when a task event passes
 * on NATS (operators may read every event), and sent only when it changed.
 */
import { errorMessage } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';
import type { Subscription } from '@nats-io/nats-core';
import type { DashboardData } from './data.js';
import type { LiveTopics, Topic } from './view.js';

export type Sink = (topic: Topic | 'problem', data: unknown) => void;

// Limits refresh like the task list (decision 0020 §6).
const INTERVAL_MS: Record<Topic, number> = { tasks: 1_000, alerts: 2_000, cluster: 2_000, identity: 5_000, limits: 1_000 };
/** Events come in bursts (one per transition): one read per burst. */
const EVENT_DEBOUNCE_MS = 150;

export class LiveHub {
  private readonly sinks = new Map<Topic, Set<Sink>>();
  private readonly last = new Map<Topic, string>();
  private readonly timers = new Map<Topic, NodeJS.Timeout>();
  private readonly busy = new Set<Topic>();
  private events: Subscription | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly data: DashboardData,
    private readonly log: Logger,
  ) {}

  /** Starts sending `topics` to `sink` (the latest snapshot at once); returns the unsubscribe. */
  subscribe(topics: readonly Topic[], sink: Sink): () => void {
    for (const t of topics) {
      let set = this.sinks.get(t);
      if (!set) this.sinks.set(t, (set = new Set()));
      set.add(sink);
      const last = this.last.get(t);
      if (last !== undefined) sink(t, JSON.parse(last));
      if (!this.timers.has(t)) {
        this.timers.set(
          t,
          setInterval(() => void this.refresh(t), INTERVAL_MS[t]),
        );
        void this.refresh(t);
      }
    }
    this.followEvents();
    return () => {
      for (const t of topics) {
        const set = this.sinks.get(t);
        set?.delete(sink);
        if (set && set.size === 0) {
          clearInterval(this.timers.get(t));
          this.timers.delete(t);
          this.last.delete(t);
        }
      }
    };
  }

  /** Reads a topic now and sends it to its listeners if it changed. */
  async refresh(t: Topic): Promise<void> {
    if (this.busy.has(t) || this.closed) return;
    this.busy.add(t);
    try {
      const value = await this.read(t);
      const json = JSON.stringify(value);
      if (this.last.get(t) === json) return;
      this.last.set(t, json);
      for (const sink of this.sinks.get(t) ?? []) sink(t, value);
    } catch (e) {
      const message = `${t}: ${errorMessage(e)}`;
      this.log.warn({ err: errorMessage(e), topic: t }, 'dashboard read failed');
      for (const sink of this.sinks.get(t) ?? []) sink('problem', { topic: t, message });
    } finally {
      this.busy.delete(t);
    }
  }

  private async read<T extends Topic>(t: T): Promise<LiveTopics[T]> {
    const d = this.data;
    switch (t) {
      case 'tasks':
        return (await d.tasks()) as LiveTopics[T];
      case 'alerts':
        return (d.me.canAct ? await d.client.alerts() : []) as LiveTopics[T];
      case 'cluster':
        return (await d.cluster()) as LiveTopics[T];
      case 'limits':
        return (await d.limits()) as LiveTopics[T];
      default:
        return (d.probed ? d.me : await d.probe()) as LiveTopics[T];
    }
  }

  /** Operators read every task event: one refresh of tasks and alerts per burst of them. */
  private followEvents(): void {
    if (this.events || !this.data.me.canAct) return;
    const sub = this.data.client.bus.nc.subscribe(this.data.client.bus.names.subjects.eventAll);
    this.events = sub;
    void (async () => {
      for await (const _ of sub) {
        if (this.debounce) continue;
        this.debounce = setTimeout(() => {
          this.debounce = undefined;
          void this.refresh('tasks');
          void this.refresh('alerts');
        }, EVENT_DEBOUNCE_MS);
      }
    })().catch((e: unknown) => this.log.warn({ err: errorMessage(e) }, 'dashboard stopped following task events'));
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers.values()) clearInterval(t);
    this.timers.clear();
    clearTimeout(this.debounce);
    this.events?.unsubscribe();
  }
}
