/** The dashboard page: a hash router over the pages, with the identity (may it act?) from the live stream. */
import { html } from 'htm/preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Topic } from '../dashboard/view.js';
import { useLiveStream } from './api.js';
import { AlertsPage, DeadLettersPage } from './pages/alerts.js';
import { ClusterPage } from './pages/cluster.js';
import { LimitsPage } from './pages/limits.js';
import { SchedulesPage } from './pages/schedules.js';
import { TaskPage } from './pages/task.js';
import { TasksPage } from './pages/tasks.js';
import { WorkflowsPage } from './pages/workflows.js';

const NAV = [
  ['#/tasks', 'Tasks'],
  ['#/alerts', 'Alerts'],
  ['#/dead-letters', 'Dead letters'],
  ['#/workflows', 'Workflows'],
  ['#/schedules', 'Schedules'],
  ['#/limits', 'Limits'],
  ['#/cluster', 'Cluster'],
] as const;

function useHash(): string {
  const [hash, setHash] = useState(location.hash || '#/tasks');
  useEffect(() => {
    const on = (): void => setHash(location.hash || '#/tasks');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function App() {
  const hash = useHash();
  const task = /^#\/tasks\/(.+)$/.exec(hash);
  const taskId = task?.[1] ? decodeURIComponent(task[1]) : undefined;
  const topics: Topic[] = ['identity'];
  if (!taskId && (hash.startsWith('#/tasks') || hash === '#/')) topics.push('tasks');
  if (hash.startsWith('#/alerts')) topics.push('alerts');
  if (hash.startsWith('#/cluster')) topics.push('cluster');
  if (hash.startsWith('#/limits')) topics.push('limits');
  const live = useLiveStream(topics, taskId);
  const me = live.snapshots.identity;
  const page = taskId ? html`<${TaskPage} key=${taskId} taskId=${taskId} me=${me} live=${live} />`
    : hash.startsWith('#/alerts') ? html`<${AlertsPage} me=${me} live=${live} />`
    : hash.startsWith('#/dead-letters') ? html`<${DeadLettersPage} me=${me} />`
    : hash.startsWith('#/workflows') ? html`<${WorkflowsPage} />`
    : hash.startsWith('#/schedules') ? html`<${SchedulesPage} me=${me} />`
    : hash.startsWith('#/cluster') ? html`<${ClusterPage} live=${live} />`
    : hash.startsWith('#/limits') ? html`<${LimitsPage} live=${live} />`
    : html`<${TasksPage} live=${live} />`;
  return html`<header>
      <b class="logo">Triad</b>
      <nav>${NAV.map(([href, label]) => html`<a href=${href} class=${hash.startsWith(href) ? 'on' : ''}>${label}</a>`)}</nav>
      <span class="who" id="identity" data-can-act=${me ? String(me.canAct) : ''}>${me ? `${me.namespace} · ${me.clientId} · ${me.canAct ? 'operator' : 'read-only'}${me.reads === 'own' ? ' · own tasks' : ''}` : ''}</span>
    </header>
    <main>${page}</main>`;
}

const root = document.getElementById('app');
if (root) render(html`<${App} />`, root);
