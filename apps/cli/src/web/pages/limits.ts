/**
 * Dispatch limits (decision 0020 §6): `triad limits list` as a table refreshed like the task list — per
 * agent type in flight, waiting, the rate now, the oldest wait, a pause — and on a click an agent type's
 * keys with the most waiting. Read-only: limits are set with the CLI or the SDK (open question 7).
 */
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import type { AgentLimitStatus } from '@triad/protocol';
import { KEY_HEADERS, LIMIT_HEADERS, describeLimit, keyRow, limitRow } from '../../limits-text.js';
import { api, type Live } from '../api.js';

const title = (h: string): string => h.charAt(0) + h.slice(1).toLowerCase();

export function LimitsPage({ live }: { live: Live }) {
  const v = live.snapshots.limits;
  const problem = live.problems['limits'];
  const [open, setOpen] = useState<string | undefined>(undefined);
  const [keys, setKeys] = useState<AgentLimitStatus | undefined>(undefined);
  const [keysProblem, setKeysProblem] = useState<string | undefined>(undefined);
  // The open agent type's keys, read again with each new snapshot of the table.
  useEffect(() => {
    if (open === undefined) return;
    let stale = false;
    api<AgentLimitStatus>(`/api/limits/${encodeURIComponent(open)}/keys?keys=10`).then(
      (k) => {
        if (stale) return;
        setKeys(k);
        setKeysProblem(undefined);
      },
      (e: unknown) => !stale && setKeysProblem((e as Error).message),
    );
    return () => {
      stale = true;
    };
  }, [open, v]);
  if (!v) return html`<section><h1>Limits</h1><p class=${problem ? 'problem' : 'muted'}>${problem ?? 'loading…'}</p></section>`;
  const now = Date.now();
  const toggle = (agent: string): void => {
    setKeys(undefined);
    setOpen(open === agent ? undefined : agent);
  };
  return html`<section>
    <h1>Limits</h1>
    ${problem ? html`<p class="problem">${problem}</p>` : null}
    ${v.why ? html`<p class="muted" id="limits-why">${v.why}</p>` : null}
    ${!v.why && v.limits.length === 0 ? html`<p class="muted" id="no-limits">No dispatch limit: every step is sent to its agents as soon as it is ready. Set one with <code>triad limits set</code>.</p>` : null}
    <p class="muted">Per agent type, across every scheduler and agent process. Click an agent type for its keys with the most waiting.</p>
    <table class="list" id="limits">
      <thead><tr>${LIMIT_HEADERS.map((h) => html`<th>${title(h)}</th>`)}</tr></thead>
      <tbody>${v.limits.map((s) => {
        const row = limitRow(s, now);
        return html`<tr data-agent=${s.agent} data-waiting=${String(s.waiting)} data-in-flight=${String(s.inFlight)} class=${`clickable${open === s.agent ? ' on' : ''}`} title=${s.limit ? describeLimit(s.limit) : ''} onClick=${() => toggle(s.agent)}>
          ${row.map((c) => html`<td>${c}</td>`)}</tr>${open === s.agent
            ? html`<tr class="keys-row"><td colspan=${LIMIT_HEADERS.length}>
                ${keysProblem ? html`<p class="problem">${keysProblem}</p>` : null}
                ${keys && (keys.keys ?? []).length === 0 ? html`<p class="muted">No key has anything waiting or in flight.</p>` : null}
                ${keys && (keys.keys ?? []).length > 0
                  ? html`<table class="list" id="limit-keys" data-agent=${s.agent}>
                      <thead><tr>${KEY_HEADERS.map((h) => html`<th>${title(h)}</th>`)}</tr></thead>
                      <tbody>${(keys.keys ?? []).map((k) => html`<tr data-key=${k.key} data-waiting=${String(k.waiting)}>${keyRow(k, keys.limit, now).map((c) => html`<td>${c}</td>`)}</tr>`)}</tbody>
                    </table>`
                  : keysProblem ? null : html`<p class="muted">loading…</p>`}
              </td></tr>`
            : null}`;
      })}</tbody>
    </table>
  </section>`;
}
