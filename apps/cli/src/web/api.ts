/** The page's side of the dashboard API: JSON requests, the tab's one live stream, and formatting. */
import { useEffect, useState } from 'preact/hooks';
import type { TaskEvent } from '@triad/protocol';
import type { LiveTopics, TaskDetail, Topic } from '../dashboard/view.js';

/** A JSON request; a refusal throws the server's message. */
export async function api<T>(path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
  if (!res.ok) throw new Error(json.error?.message ?? `${res.status} ${res.statusText}`);
  return json as T;
}

/** What the tab's live stream has delivered: each topic's latest snapshot, the followed task, its events, problems. */
export interface Live {
  snapshots: Partial<LiveTopics>;
  task: TaskDetail | undefined;
  events: TaskEvent[];
  /** The last problem per topic ("task" for the followed task); empty once the topic reads again. */
  problems: Record<string, string>;
}

/**
 * One server-sent-events connection per tab for everything the current page shows: browsers allow six
 * connections to a host, and a stream per widget (or per tab's widgets) would starve its requests.
 */
export function useLiveStream(topics: readonly Topic[], taskId: string | undefined): Live {
  const [live, setLive] = useState<Live>({ snapshots: {}, task: undefined, events: [], problems: {} });
  const url = `/api/live?topics=${topics.join(',')}${taskId ? `&task=${encodeURIComponent(taskId)}` : ''}`;
  useEffect(() => {
    setLive((l) => ({ snapshots: l.snapshots, task: undefined, events: [], problems: {} }));
    const es = new EventSource(url);
    const on = (name: string, fn: (data: unknown) => void): void => es.addEventListener(name, (e) => fn(JSON.parse((e as MessageEvent<string>).data)));
    for (const t of topics) on(t, (v) => setLive((l) => ({ ...l, snapshots: { ...l.snapshots, [t]: v }, problems: { ...l.problems, [t]: '' } })));
    on('state', (v) => setLive((l) => ({ ...l, task: v as TaskDetail, problems: { ...l.problems, task: '' } })));
    on('event', (v) => {
      const ev = v as TaskEvent;
      setLive((l) => (l.events.some((e) => e.seq === ev.seq) ? l : { ...l, events: [...l.events, ev].sort((a, b) => a.seq - b.seq) }));
    });
    on('problem', (v) => {
      const p = v as { topic?: string; message: string };
      setLive((l) => ({ ...l, problems: { ...l.problems, [p.topic ?? 'task']: p.message } }));
    });
    return () => es.close();
  }, [url]);
  return live;
}

export function time(ms: number | undefined): string {
  return ms === undefined ? '' : new Date(ms).toLocaleTimeString(undefined, { hour12: false });
}

export function dateTime(ms: number | undefined): string {
  return ms === undefined ? '' : new Date(ms).toLocaleString(undefined, { hour12: false });
}

export function ms(d: number | undefined): string {
  if (d === undefined) return '';
  return d < 1 ? '< 1 ms' : d < 1000 ? `${Math.round(d)} ms` : d < 60_000 ? `${(d / 1000).toFixed(1)} s` : `${(d / 60_000).toFixed(1)} min`;
}
