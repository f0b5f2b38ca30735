/**
 * Tasks: the live list with status, workflow and age; filters by status and workflow; search by task id;
 * and, by tags (decision 0021 §1.7), every matching task from the search index, a page at a time.
 */
import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import type { TaskSummary } from '@triad/protocol';
import { TASK_STATUSES } from '@triad/protocol/constants';
import { age } from '../../dashboard/view.js';
import { api, type Live } from '../api.js';

/** A tag search's results so far: the query it ran (tags, status, workflow), its pages, and where the next starts. */
interface Found {
  query: string;
  tasks: TaskSummary[];
  next?: string;
}

export function TasksPage({ live }: { live: Live }) {
  const tasks = live.snapshots.tasks;
  const problem = live.problems['tasks'];
  const [status, setStatus] = useState('');
  const [workflow, setWorkflow] = useState('');
  const [search, setSearch] = useState('');
  const [searchProblem, setSearchProblem] = useState<string | undefined>(undefined);
  const [tags, setTags] = useState('');
  const [found, setFound] = useState<Found | undefined>(undefined);
  const [tagProblem, setTagProblem] = useState<string | undefined>(undefined);
  const now = Date.now();
  const all = tasks ?? [];
  const statuses = found ? [...TASK_STATUSES] : [...new Set(all.map((t) => t.status))].sort();
  const workflows = [...new Set(all.map((t) => t.workflow))].sort();
  // With a tag search, its matches (any age, from the index); else the live list of recent tasks.
  const source = found?.tasks ?? all;
  const shown = source.filter((t) => (!status || t.status === status) && (!workflow || t.workflow === workflow) && (!search || t.taskId.includes(search.trim())));
  const find = async (cursor?: string): Promise<void> => {
    const query = new URLSearchParams({ tags: tags.trim(), ...(status ? { status } : {}), ...(workflow ? { workflow } : {}) }).toString();
    try {
      const r = await api<{ tasks: TaskSummary[]; next?: string }>(`/api/search?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      setFound({ query, tasks: cursor && found ? [...found.tasks, ...r.tasks] : r.tasks, ...(r.next ? { next: r.next } : {}) });
      setTagProblem(undefined);
    } catch (err) {
      setTagProblem((err as Error).message);
    }
  };
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
    <form class="filters" id="tag-search" onSubmit=${(e: Event) => { e.preventDefault(); void find(); }}>
      <label>Tags <input name="tags" placeholder="customer=c-42 region=eu" value=${tags} onInput=${(e: Event) => { setTags((e.target as HTMLInputElement).value); setTagProblem(undefined); }} /></label>
      <button type="submit">Search</button>
      ${found ? html`<button type="button" id="clear-search" onClick=${() => { setFound(undefined); setTags(''); }}>Clear</button>` : null}
      <span class="muted">${found ? `${found.tasks.length} found${found.next ? ', more to load' : ''} (status and workflow as selected above)` : 'every task with these tags, of any age, from the search index'}</span>
    </form>
    ${tagProblem ? html`<p class="problem" id="tag-problem">${tagProblem}</p>` : null}
    ${problem || searchProblem ? html`<p class="problem">${searchProblem ?? problem}</p>` : null}
    <table class="list" id="tasks" data-source=${found ? 'search' : 'live'}>
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
    ${found?.next ? html`<button type="button" id="more" onClick=${() => void find(found.next)}>More</button>` : null}
  </section>`;
}
