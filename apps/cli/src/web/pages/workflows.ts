/** Workflows and their versions, each drawn as a DAG with its compensations and bounds. */
import { html } from 'htm/preact';
import { useEffect, useState } from 'preact/hooks';
import type { WorkflowView } from '../../dashboard/view.js';
import { api, dateTime, ms } from '../api.js';
import { Dag } from '../dag.js';

export function WorkflowsPage() {
  const [list, setList] = useState<WorkflowView[] | undefined>(undefined);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const [chosen, setChosen] = useState<Record<string, number>>({});
  useEffect(() => {
    api<WorkflowView[]>('/api/workflows').then(setList, (e: Error) => setProblem(e.message));
  }, []);
  return html`<section>
    <h1>Workflows</h1>
    ${problem ? html`<p class="problem">${problem}</p>` : null}
    ${list && list.length === 0 ? html`<p class="muted">No workflow registered.</p>` : null}
    ${(list ?? []).map((w) => {
      const v = w.versions.find((x) => x.version === (chosen[w.name] ?? w.latest)) ?? w.versions[0];
      if (!v) return null;
      return html`<article class="workflow" data-workflow=${w.name}>
        <h2>${w.name} <select value=${v.version} onChange=${(e: Event) => setChosen({ ...chosen, [w.name]: Number((e.target as HTMLSelectElement).value) })}>
          ${w.versions.map((x) => html`<option value=${x.version}>v${x.version}${x.version === w.latest ? ' (latest)' : ''}</option>`)}</select></h2>
        ${v.description ? html`<p>${v.description}</p>` : null}
        <p class="muted">registered ${dateTime(v.registeredAt)} · on failure: ${v.onFailure}${v.deadlineMs !== undefined ? ` · deadline ${ms(v.deadlineMs)}` : ''}</p>
        <p>A task ends within <b>${v.bounds.total}</b> — run ${v.bounds.run}, undo ${v.bounds.undo}.</p>
        <div class="scroll"><${Dag} steps=${v.steps} /></div>
      </article>`;
    })}
  </section>`;
}
