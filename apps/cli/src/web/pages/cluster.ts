/** The cluster: supervisor leader, epoch and sweep lag; agents consuming now; stream and consumer backlogs. */
import { html } from 'htm/preact';
import { age } from '../../dashboard/view.js';
import { dateTime, ms, type Live } from '../api.js';

export function ClusterPage({ live }: { live: Live }) {
  const c = live.snapshots.cluster;
  const problem = live.problems['cluster'];
  if (!c) return html`<section><h1>Cluster</h1><p class=${problem ? 'problem' : 'muted'}>${problem ?? 'loading…'}</p></section>`;
  const now = c.at;
  return html`<section>
    <h1>Cluster</h1>
    ${[...c.problems, ...(problem ? [problem] : [])].map((p) => html`<p class="problem">${p}</p>`)}
    <div class="cards">
      <div class="card" id="leader"><span class="muted">Supervisor leader</span><b>${c.leader?.id ?? 'none'}</b></div>
      <div class="card"><span class="muted">Epoch</span><b>${c.leader?.epoch ?? '-'}</b></div>
      <div class="card"><span class="muted">Sweep lag</span><b>${c.sweepLagMs !== undefined ? ms(c.sweepLagMs) : '-'}</b></div>
      <div class="card"><span class="muted">Agent types consuming</span><b>${c.agents.filter((a) => a.waiting > 0 || a.inFlight > 0).length} / ${c.agents.length}</b></div>
    </div>
    <h2>Supervisors</h2>
    <table class="list"><thead><tr><th>Id</th><th>Leading</th><th>Epoch</th><th>Last sweep</th><th>Sweep</th><th>Expired waiting</th><th>Reported</th></tr></thead>
      <tbody>${c.supervisors.map((s) => html`<tr><td>${s.id}</td><td>${s.leading ? 'yes' : 'no'}</td><td>${s.epoch}</td><td>${dateTime(s.lastSweepAt)}</td><td>${ms(s.sweepMs)}</td><td>${s.expiredWaiting}</td><td>${age(s.at, now)} ago</td></tr>`)}</tbody></table>
    <h2>Agents</h2>
    <p class="muted">Per agent type, from its step consumer: pull requests waiting are agent processes consuming now.</p>
    <table class="list" id="agents"><thead><tr><th>Agent type</th><th>Pulls waiting</th><th>In flight</th><th>Backlog</th><th>Last seen</th></tr></thead>
      <tbody>${c.agents.map((a) => html`<tr><td>${a.agent}</td><td>${a.waiting}</td><td>${a.inFlight}</td><td>${a.pending}</td><td>${a.lastActive ? `${age(a.lastActive, now)} ago` : 'never'}</td></tr>`)}</tbody></table>
    <h2>Streams and consumers</h2>
    <table class="list" id="streams"><thead><tr><th>Stream</th><th>Messages</th><th>Bytes</th><th>Consumer</th><th>Backlog</th><th>Unacked</th><th>Redelivered</th><th>Pulls waiting</th></tr></thead>
      <tbody>${c.streams.flatMap((s) =>
        (s.consumers.length === 0 ? [undefined] : s.consumers).map((k, i) => html`<tr>
          <td>${i === 0 ? s.name : ''}</td><td>${i === 0 ? s.messages : ''}</td><td>${i === 0 ? s.bytes : ''}</td>
          <td>${k?.name ?? ''}</td><td>${k?.pending ?? ''}</td><td>${k?.ackPending ?? ''}</td><td>${k?.redelivered ?? ''}</td><td>${k?.waiting ?? ''}</td></tr>`),
      )}</tbody></table>
  </section>`;
}
