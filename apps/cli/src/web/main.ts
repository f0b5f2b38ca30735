/** The dashboard page: a hash router over the pages, with the identity (may it act?) from the live stream. */
import { html } from 'htm/preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { useLive } from './api.js';
import { AlertsPage, DeadLettersPage } from './pages/alerts.js';
import { ClusterPage } from './pages/cluster.js';
import { TaskPage } from './pages/task.js';
import { TasksPage } from './pages/tasks.js';
import { WorkflowsPage } from './pages/workflows.js';

const NAV = [
  ['#/tasks', 'Tasks'],
  ['#/alerts', 'Alerts'],
  ['#/dead-letters', 'Dead letters'],
  ['#/workflows', 'Workflows'],
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
  const { value: me } = useLive('identity');
  const task = /^#\/tasks\/(.+)$/.exec(hash);
  const page = task?.[1] ? html`<${TaskPage} key=${task[1]} taskId=${decodeURIComponent(task[1])} me=${me} />`
    : hash.startsWith('#/alerts') ? html`<${AlertsPage} me=${me} />`
    : hash.startsWith('#/dead-letters') ? html`<${DeadLettersPage} me=${me} />`
    : hash.startsWith('#/workflows') ? html`<${WorkflowsPage} />`
    : hash.startsWith('#/cluster') ? html`<${ClusterPage} />`
    : html`<${TasksPage} />`;
  return html`<header>
      <b class="logo">Triad</b>
      <nav>${NAV.map(([href, label]) => html`<a href=${href} class=${hash.startsWith(href) ? 'on' : ''}>${label}</a>`)}</nav>
      <span class="who" id="identity" data-can-act=${me ? String(me.canAct) : ''}>${me ? `${me.namespace} · ${me.clientId} · ${me.canAct ? 'operator' : 'read-only'}` : ''}</span>
    </header>
    <main>${page}</main>`;
}

const root = document.getElementById('app');
if (root) render(html`<${App} />`, root);
