/** The page's side of the dashboard API: JSON requests, server-sent-event hooks, and the shared identity. */
import { useEffect, useState } from 'preact/hooks';
import type { LiveTopics, Topic } from '../dashboard/view.js';

/** A JSON request; a refusal throws the server's message. */
export async function api<T>(path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
  if (!res.ok) throw new Error(json.error?.message ?? `${res.status} ${res.statusText}`);
  return json as T;
}

/** One live topic's latest snapshot (and the last problem reading it). */
export function useLive<T extends Topic>(topic: T): { value: LiveTopics[T] | undefined; problem: string | undefined } {
  const [value, setValue] = useState<LiveTopics[T] | undefined>(undefined);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  useEffect(() => {
    const es = new EventSource(`/api/live?topics=${topic}`);
    es.addEventListener(topic, (e) => {
      setValue(JSON.parse((e as MessageEvent<string>).data) as LiveTopics[T]);
      setProblem(undefined);
    });
    es.addEventListener('problem', (e) => setProblem((JSON.parse((e as MessageEvent<string>).data) as { message: string }).message));
    return () => es.close();
  }, [topic]);
  return { value, problem };
}

/** Server-sent events of one URL, by event name, to handlers (re-opened when the URL changes). */
export function useEvents(url: string, handlers: Record<string, (data: unknown) => void>): void {
  useEffect(() => {
    const es = new EventSource(url);
    for (const [name, fn] of Object.entries(handlers)) es.addEventListener(name, (e) => fn(JSON.parse((e as MessageEvent<string>).data)));
    return () => es.close();
    // The handlers are set-state functions: the URL alone decides when to reconnect.
  }, [url]);
}

export function time(ms: number | undefined): string {
  return ms === undefined ? '' : new Date(ms).toLocaleTimeString(undefined, { hour12: false });
}

export function dateTime(ms: number | undefined): string {
  return ms === undefined ? '' : new Date(ms).toLocaleString(undefined, { hour12: false });
}

export function ms(d: number | undefined): string {
  if (d === undefined) return '';
  return d < 1000 ? `${d} ms` : d < 60_000 ? `${(d / 1000).toFixed(1)} s` : `${(d / 60_000).toFixed(1)} min`;
}
