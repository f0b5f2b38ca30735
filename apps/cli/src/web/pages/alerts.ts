/** Alerts (steps that failed for good) with their reasons and a retry button; dead letters with their reasons, decoded. */
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import type { StoredDeadLetter } from '@triad/client';
import type { Identity } from '../../dashboard/view.js';
import { api, dateTime, type Live } from '../api.js';

export function AlertsPage({ me, live }: { me: Identity | undefined; live: Live }) {
  const alerts = live.snapshots.alerts;
  const problem = live.problems['alerts'];
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [failure, setFailure] = useState<string | undefined>(undefined);
  const retry = async (taskId: string, step: string | undefined): Promise<void> => {
    try {
      const r = await api<{ step: string; attempt: number }>(`/api/tasks/${encodeURIComponent(taskId)}/retry`, step ? { step } : {});
      setNotice(`retrying ${r.step} of ${taskId} (attempt ${r.attempt})`);
      setFailure(undefined);
    } catch (e) {
      setFailure((e as Error).message);
    }
  };
  return html`<section>
    <h1>Alerts</h1>
    ${!me?.canAct ? html`<p class="muted">Alerts are the operator's: ${me?.why ?? 'this dashboard does not hold the operator role'}.</p>` : null}
    ${problem || failure ? html`<p class="problem">${failure ?? problem}</p>` : null}
    ${notice ? html`<p class="notice">${notice}</p>` : null}
    ${me?.canAct && alerts && alerts.length === 0 ? html`<p class="muted">No open alerts.</p>` : null}
    <table class="list" id="alerts">
      <thead><tr><th>Raised</th><th>Kind</th><th>Task</th><th>Step</th><th>Failures</th><th>Reason</th><th></th></tr></thead>
      <tbody>${(alerts ?? []).map((a) => html`<tr data-task=${a.taskId} data-step=${a.step ?? ''}>
        <td>${dateTime(a.raisedAt)}</td><td>${a.kind}</td><td><a href=${`#/tasks/${encodeURIComponent(a.taskId)}`}>${a.taskId}</a></td>
        <td>${a.step ?? ''}</td><td>${a.failureCount}</td><td class="err">${a.lastError ?? ''}</td>
        <td>${me?.canAct ? html`<button class="retry-alert" onClick=${() => void retry(a.taskId, a.step)}>Retry</button>` : null}</td></tr>`)}</tbody>
    </table>
  </section>`;
}

export function DeadLettersPage({ me }: { me: Identity | undefined }) {
  const [letters, setLetters] = useState<StoredDeadLetter[] | undefined>(undefined);
  const [source, setSource] = useState('');
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const load = async (): Promise<void> => {
    try {
      setLetters(await api<StoredDeadLetter[]>(`/api/dead-letters${source ? `?source=${encodeURIComponent(source)}` : ''}`));
      setProblem(undefined);
    } catch (e) {
      setProblem((e as Error).message);
    }
  };
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), 3_000);
    return () => clearInterval(t);
  }, [source]);
  // Shows exactly where the replay goes (and who may have written the letter) before it is sent; the
  // server publishes only to the subject shown here (decision 0022).
  const replay = async (d: StoredDeadLetter): Promise<void> => {
    if (!d.replay.ok) return;
    const what = [`Replay dead letter ${d.seq}?`, `It publishes its original (${d.original.bytes} bytes) to ${d.replay.subject} (stream ${d.replay.stream}).`];
    if (d.writer.warning) what.push(`Warning: ${d.writer.warning}`);
    if (!window.confirm(what.join('\n\n'))) return;
    try {
      const r = await api<{ subject: string; duplicate: boolean; stream: string; storedSeq: number }>(`/api/dead-letters/${d.seq}/replay`, { subject: d.replay.subject });
      setNotice(r.duplicate ? `dead letter ${d.seq} was replayed a moment ago: not stored again` : `replayed dead letter ${d.seq} to ${r.subject}: stored as ${r.stream} #${r.storedSeq}`);
    } catch (e) {
      setProblem((e as Error).message);
    }
  };
  const sources = [...new Set((letters ?? []).map((d) => d.source))].sort();
  return html`<section>
    <h1>Dead letters</h1>
    <div class="filters"><label>Source <select value=${source} onChange=${(e: Event) => setSource((e.target as HTMLSelectElement).value)}>
      <option value="">all</option>${[...new Set([...sources, source].filter(Boolean))].map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <span class="muted">${letters ? `${letters.length} newest` : 'loading…'}</span></div>
    ${problem ? html`<p class="problem">${problem}</p>` : null}
    ${notice ? html`<p class="notice">${notice}</p>` : null}
    <table class="list" id="dead-letters">
      <thead><tr><th>Seq</th><th>Received</th><th>Source</th><th>Subject</th><th>Reason</th><th>Message</th><th></th></tr></thead>
      <tbody>${(letters ?? []).map((d) => html`<tr data-seq=${d.seq}>
        <td>${d.seq}</td><td>${dateTime(d.receivedAt)}</td><td>${d.source}</td><td><code>${d.subject ?? '?'}</code></td><td class="err">${d.reason}</td>
        <td><pre class="small">${d.original.format === 'msgpack' ? JSON.stringify(d.original.value, null, 1) : `not msgpack (${d.original.bytes} bytes)\nhex ${d.original.hex}${d.original.truncated ? '…' : ''}\nbase64 ${d.original.base64}`}</pre></td>
        <td>${d.replay.ok ? html`<span class="muted">to <code>${d.replay.subject}</code></span>` : html`<span class="muted">not replayable: ${d.replay.reason}</span>`}
          ${d.writer.warning ? html`<p class="problem small">${d.writer.warning}</p>` : null}
          ${me?.canAct && d.replay.ok ? html`<button onClick=${() => void replay(d)}>Replay</button>` : null}</td></tr>`)}</tbody>
    </table>
  </section>`;
}
