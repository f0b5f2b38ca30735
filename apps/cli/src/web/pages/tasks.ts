/** Tasks: the live list with status, workflow and age; filters by status and workflow; search by task id. */
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { age } from '../../dashboard/view.js';
import { api, type Live } from '../api.js';

export function TasksPage({ live }: { live: Live }) {
  const tasks = live.snapshots.tasks;
  const problem = live.problems['tasks'];
  const [status, setStatus] = useState('');
  const [workflow, setWorkflow] = useState('');
  const [search, setSearch] = useState('');
  const [searchProblem, setSearchProblem] = useState<string | undefined>(undefined);
  const now = Date.now();
  const all = tasks ?? [];
  const statuses = [...new Set(all.map((t) => t.status))].sort();
  const workflows = [...new Set(all.map((t) => t.workflow))].sort();
  const shown = all.filter((t) => (!status || t.status === status) && (!workflow || t.workflow === workflow) && (!search || t.taskId.includes(search.trim())));
  // A task id not in the recent list is looked up directly.
  const open = async (e: Event): Promise<void> => {
    e.preventDefault();
    const id = search.trim();
    if (!id) return;
    try {
      await api(`/api/tasks/${encodeURIComponent(id)}`);
      location.hash = `#/tasks/${encodeURIComponent(id)}`;
    } catch (err) {
      setSearchProblem((err as Error).message);
    }
  };
  return html`<section>
    <h1>Tasks</h1>
    <form class="filters" onSubmit=${open}>
      <label>Status <select name="status" value=${status} onChange=${(e: Event) => setStatus((e.target as HTMLSelectElement).value)}>
        <option value="">all</option>${statuses.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></label>
      <label>Workflow <select name="workflow" value=${workflow} onChange=${(e: Event) => setWorkflow((e.target as HTMLSelectElement).value)}>
        <option value="">all</option>${workflows.map((w) => html`<option value=${w}>${w}</option>`)}
      </select></label>
      <label>Task id <input name="search" placeholder="search or open by id" value=${search} onInput=${(e: Event) => { setSearch((e.target as HTMLInputElement).value); setSearchProblem(undefined); }} /></label>
      <button type="submit">Open</button>
      <span class="muted">${tasks ? `${shown.length} of ${all.length}` : 'loading…'}</span>
    </form>
    ${problem || searchProblem ? html`<p class="problem">${searchProblem ?? problem}</p>` : null}
    <table class="list" id="tasks">
      <thead><tr><th>Task</th><th>Workflow</th><th>Status</th><th>Age</th><th>Updated</th></tr></thead>
      <tbody>
        ${shown.map(
          (t) => html`<tr data-task=${t.taskId} data-status=${t.status}>
            <td><a href=${`#/tasks/${encodeURIComponent(t.taskId)}`}>${t.taskId}</a></td>
            <td>${t.workflow} <span class="muted">v${t.version}</span></td>
            <td><span class=${`badge st-${t.status}`}>${t.status}</span></td>
            <td>${age(t.createdAt, now)}</td>
            <td>${age(t.updatedAt, now)} ago</td>
          </tr>`,
        )}
      </tbody>
    </table>
  </section>`;
}
