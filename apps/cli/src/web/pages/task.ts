/**
 * One task: its workflow's DAG with each step's state, the timeline of attempts, its events as they
 * arrive, input and outputs; cancel, and retry a failed step with an edited input (operators only).
 */
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { attemptsFromEvents, TERMINAL_TASK, type Identity } from '../../dashboard/view.js';
import { api, dateTime, ms, time, type Live } from '../api.js';
import { Dag } from '../dag.js';
import type { StepState } from '@triad/protocol';
import { stepWaiting } from '../../waiting.js';

const RETRYABLE_STEP = new Set(['failed', 'error', 'parked', 'abandoned']);

export function TaskPage({ taskId, me, live }: { taskId: string; me: Identity | undefined; live: Live }) {
  const detail = live.task?.task.taskId === taskId ? live.task : undefined;
  const events = live.events;
  const [failure, setProblem] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const problem = failure ?? (live.problems['task'] || undefined);
  if (!detail) return html`<section><h1>Task ${taskId}</h1><p class=${problem ? 'problem' : 'muted'}>${problem ?? 'loading…'}</p></section>`;
  const t = detail.task;
  const attempts = attemptsFromEvents(events, t.steps);
  const t0 = Math.min(t.createdAt, ...attempts.map((a) => a.startedAt ?? t.createdAt));
  const t1 = Math.max(Date.now(), t.finishedAt ?? 0);
  const span = Math.max(1, t1 - t0);
  const act = async (path: string, body: unknown, done: string): Promise<void> => {
    try {
      await api(path, body);
      setNotice(done);
      setProblem(undefined);
    } catch (e) {
      setProblem((e as Error).message);
    }
  };
  // What each step waits for (decision 0021 §3.5), in this browser's time: under it in the DAG and in the table.
  const now = Date.now();
  const waiting = new Map(t.steps.map((s) => [s.name, stepWaiting(t, s, now, detail.context ?? {})]));
  const dagSteps = detail.steps.map((s) => {
    const w = waiting.get(s.name);
    return w ? { ...s, waiting: w } : s;
  });
  const failedSteps = t.steps.filter((s) => RETRYABLE_STEP.has(s.status) || (t.status === 'failed' && s.status !== 'processed'));
  return html`<section>
    <h1>Task <code>${t.taskId}</code> <span class=${`badge st-${t.status}`} id="task-status">${t.status}</span></h1>
    <p class="muted">${t.workflow} v${t.version} · submitted by ${t.client ?? 'default'} · created ${dateTime(t.createdAt)} · updated ${time(t.updatedAt)}${t.parent ? html` · child of <a id="parent-link" href=${`#/tasks/${encodeURIComponent(t.parent.taskId)}`}>${t.parent.taskId}</a> (step ${t.parent.step})` : null}${t.error ? html` · <span class="problem-inline">${t.error}</span>` : null}${t.admission === 'waiting' ? html` · <span id="admission">waiting for admission: its client has as many active tasks as its cap allows in this task's bucket (decision 0024)</span>` : t.admission === 'admitted' ? html` · <span id="admission">admitted: its steps start now</span>` : null}</p>
    ${problem ? html`<p class="problem">${problem}</p>` : null}
    ${notice ? html`<p class="notice">${notice}</p>` : null}
    ${me?.canAct
      ? html`<div class="actions">
          ${!TERMINAL_TASK.has(t.status) ? html`<button class="danger" id="cancel" onClick=${() => void act(`/api/tasks/${encodeURIComponent(t.taskId)}/cancel`, { reason: 'cancelled from the dashboard' }, 'cancel requested: the task stops and undoes what it did')}>Cancel task</button>` : null}
        </div>`
      : null}
    <h2>Steps</h2>
    <div class="scroll"><${Dag} steps=${dagSteps} /></div>
    <table class="list" id="steps">
      <thead><tr><th>Step</th><th>Agent</th><th>Status</th><th>Attempt</th><th>Failures</th><th>Locked by</th><th>Complete by</th><th>Error</th><th>Detail</th></tr></thead>
      <tbody>${t.steps.map((s) => html`<tr data-step=${s.name} data-status=${s.status}>
        <td>${s.name}</td><td>${s.agent}</td><td><span class=${`badge st-${s.status}`}>${s.status}</span></td><td>${s.attempt}</td><td>${s.failureCount}</td>
        <td>${s.lockedBy ?? ''}</td><td>${time(s.completeBy)}</td><td class="err">${s.error ?? ''}</td><td class="detail">${waiting.get(s.name) ?? ''}${s.child ? html` <a class="child-link" href=${`#/tasks/${encodeURIComponent(s.child.taskId)}`}>open</a>` : null}</td></tr>`)}</tbody>
    </table>
    ${signalSteps(t).length > 0 ? html`<${SignalForm} taskId=${t.taskId} steps=${signalSteps(t)} onDone=${(m: string) => setNotice(m)} onProblem=${setProblem} />` : null}
    ${me?.canAct && failedSteps.length > 0 ? html`<${RetryForm} taskId=${t.taskId} steps=${failedSteps.map((s) => s.name)} input=${t.input} onDone=${(m: string) => setNotice(m)} onProblem=${setProblem} />` : null}
    <h2>Attempts</h2>
    <table class="list" id="attempts">
      <thead><tr><th>Step</th><th>Phase</th><th>Attempt</th><th>Agent</th><th>Start</th><th>End</th><th>Outcome</th><th class="bar-col">Timeline</th><th>Error</th></tr></thead>
      <tbody>${attempts.map((a) => {
        const left = (((a.startedAt ?? t0) - t0) / span) * 100;
        const width = Math.max(0.8, (((a.endedAt ?? t1) - (a.startedAt ?? t0)) / span) * 100);
        return html`<tr><td>${a.step}</td><td>${a.phase}</td><td>${a.attempt}</td><td>${a.agent}</td><td>${time(a.startedAt)}</td>
          <td>${a.endedAt ? `${time(a.endedAt)} (${ms(a.endedAt - (a.startedAt ?? a.endedAt))})` : ''}</td>
          <td><span class=${`badge oc-${a.outcome}`}>${a.outcome}</span></td>
          <td class="bar-col"><div class="bar"><span class=${`oc-${a.outcome}`} style=${`left:${left}%;width:${Math.min(width, 100 - left)}%`}></span></div></td>
          <td class="err">${a.error ?? ''}</td></tr>`;
      })}</tbody>
    </table>
    <div class="two">
      <div><h2>Input</h2><pre>${JSON.stringify(t.input, null, 2) ?? '(none)'}</pre>
        <h2>Outputs</h2>${t.steps.filter((s) => s.output !== undefined).map((s) => html`<h3>${s.name}</h3><pre>${JSON.stringify(s.output, null, 2)}</pre>`)}</div>
      <div><h2>Events</h2>
        <ol class="events" id="events">${events.map((e) => html`<li data-type=${e.type}><span class="muted">#${e.seq} ${time(e.at)}</span> <b>${e.type}</b>${e.step ? ` ${e.step}` : ''}${e.attempt !== undefined ? ` (attempt ${e.attempt})` : ''}${e.reason ? html` <span class="err">${e.reason}</span>` : null}</li>`)}</ol></div>
    </div>
  </section>`;
}

/** Retry a failed step, optionally with an edited task input (sent only when it was changed). */
/** The waitFor steps a signal may still reach: waiting, or pending (it is then kept until they wait). */
function signalSteps(t: { status: string; steps: readonly StepState[] }): StepState[] {
  if (t.status !== 'running') return [];
  return t.steps.filter((s) => s.signal !== undefined && (s.status === 'waiting' || s.status === 'pending'));
}

/**
 * Sends a signal to a waiting step (decision 0019 §7): its name prefilled, optional JSON data and id.
 * Shown to every identity: the scheduler lets an operator signal any task and a client its own.
 */
export function SignalForm({ taskId, steps, onDone, onProblem }: { taskId: string; steps: StepState[]; onDone: (m: string) => void; onProblem: (m: string) => void }) {
  const [name, setName] = useState(steps[0]?.signal ?? '');
  const [text, setText] = useState('');
  const [id, setId] = useState('');
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    let data: unknown;
    if (text.trim() !== '') {
      try {
        data = JSON.parse(text) as unknown;
      } catch (err) {
        onProblem(`the signal data is not JSON: ${(err as Error).message}`);
        return;
      }
    }
    try {
      const r = await api<{ outcome: string; step?: string; signalId: string }>(`/api/tasks/${encodeURIComponent(taskId)}/signal`, { name, ...(data !== undefined ? { data } : {}), ...(id.trim() ? { id: id.trim() } : {}) });
      onDone(r.outcome === 'delivered' ? `signal ${name} delivered to ${r.step ?? 'its step'} (id ${r.signalId})` : r.outcome === 'buffered' ? `signal ${name} kept until its step waits (id ${r.signalId})` : `signal id ${r.signalId} was already accepted: nothing changed`);
    } catch (err) {
      onProblem((err as Error).message);
    }
  };
  const names = [...new Set(steps.map((s) => s.signal ?? ''))];
  return html`<form class="retry" id="signal-form" onSubmit=${submit}>
    <h2>Send a signal</h2>
    <label>Signal <select name="name" value=${name} onChange=${(e: Event) => setName((e.target as HTMLSelectElement).value)}>${names.map((n) => html`<option value=${n}>${n}</option>`)}</select></label>
    <label>Data (JSON, optional: the step's output)<textarea name="data" rows="3" value=${text} onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}></textarea></label>
    <label>Signal id (optional; the same id twice is harmless)<input name="id" value=${id} onInput=${(e: Event) => setId((e.target as HTMLInputElement).value)} /></label>
    <button type="submit" id="signal">Send signal</button>
  </form>`;
}

export function RetryForm({ taskId, steps, input, onDone, onProblem }: { taskId: string; steps: string[]; input: unknown; onDone: (m: string) => void; onProblem: (m: string) => void }) {
  const original = JSON.stringify(input ?? {}, null, 2);
  const [step, setStep] = useState(steps[0] ?? '');
  const [text, setText] = useState(original);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    let body: { step: string; input?: unknown } = { step };
    if (text !== original) {
      try {
        body = { step, input: JSON.parse(text) as unknown };
      } catch (err) {
        onProblem(`the input is not JSON: ${(err as Error).message}`);
        return;
      }
    }
    try {
      const r = await api<{ step: string; attempt: number }>(`/api/tasks/${encodeURIComponent(taskId)}/retry`, body);
      onDone(`retrying ${r.step} (attempt ${r.attempt})${'input' in body ? ' with the edited input' : ''}`);
    } catch (err) {
      onProblem((err as Error).message);
    }
  };
  return html`<form class="retry" id="retry-form" onSubmit=${submit}>
    <h2>Retry a failed step</h2>
    <label>Step <select name="step" value=${step} onChange=${(e: Event) => setStep((e.target as HTMLSelectElement).value)}>${steps.map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
    <label>Task input (edit to replace it)<textarea name="input" rows="6" value=${text} onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}></textarea></label>
    <button type="submit" id="retry">Retry step</button>
  </form>`;
}
