/** Schedules (decision 0019 §6): each one's timing, next and last tick, counters, and pause/resume for operators. */
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import type { Schedule } from '@triad/protocol';
import type { Identity } from '../../dashboard/view.js';
import { timingText } from '../../format.js';
import { api, dateTime } from '../api.js';

export function SchedulesPage({ me }: { me: Identity | undefined }) {
  const [list, setList] = useState<Schedule[] | undefined>(undefined);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const load = async (): Promise<void> => {
    try {
      setList(await api<Schedule[]>('/api/schedules'));
      setProblem(undefined);
    } catch (e) {
      setProblem((e as Error).message);
    }
  };
  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), 2_000);
    return () => clearInterval(timer);
  }, []);
  const toggle = async (s: Schedule): Promise<void> => {
    const action = s.paused ? 'resume' : 'pause';
    try {
      await api<Schedule>(`/api/schedules/${encodeURIComponent(s.name)}/${action}`, {});
      setNotice(`schedule ${s.name} ${s.paused ? 'resumed' : 'paused'}`);
      await load();
    } catch (e) {
      setProblem((e as Error).message);
    }
  };
  return html`<section>
    <h1>Schedules</h1>
    ${problem ? html`<p class="problem">${problem}</p>` : null}
    ${notice ? html`<p class="notice">${notice}</p>` : null}
    ${list && list.length === 0 ? html`<p class="muted">No schedule. Create one with <code>triad schedules create</code>.</p>` : null}
    <table class="list" id="schedules">
      <thead><tr><th>Name</th><th>Workflow</th><th>When</th><th>Overlap</th><th>State</th><th>Next tick</th><th>Last tick → task</th><th>Fired</th><th>Skipped</th><th>Missed</th><th></th></tr></thead>
      <tbody>${(list ?? []).map((s) => html`<tr data-schedule=${s.name} data-paused=${String(s.paused)}>
        <td>${s.name}</td><td>${s.workflow}${s.version !== undefined ? `@${s.version}` : ''}</td><td>${timingText(s)}</td><td>${s.overlap}</td>
        <td class="state">${s.paused ? 'paused' : 'active'}</td><td>${s.nextTick !== undefined ? dateTime(s.nextTick) : '-'}</td>
        <td>${s.lastTick !== undefined ? dateTime(s.lastTick) : '-'}${s.lastTaskId ? html` → <a href=${`#/tasks/${encodeURIComponent(s.lastTaskId)}`}>${s.lastTaskId}</a>` : null}</td>
        <td>${s.fired}</td><td>${s.skipped}</td><td>${s.missed}</td>
        <td>${me?.canAct ? html`<button class="toggle-schedule" onClick=${() => void toggle(s)}>${s.paused ? 'Resume' : 'Pause'}</button>` : null}</td></tr>`)}</tbody>
    </table>
  </section>`;
}
