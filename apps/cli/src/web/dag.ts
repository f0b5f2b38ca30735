/** A workflow's DAG as SVG: steps in columns by dependency depth, each step's compensation under it. */
import { html } from 'htm/preact';
import { layoutDag, NODE_H, NODE_W, UNDO_H, type DagStep } from '../dashboard/view.js';
import { ms } from './api.js';

export function Dag({ steps, onSelect }: { steps: readonly DagStep[]; onSelect?: (step: string) => void }) {
  const g = layoutDag(steps);
  return html`<svg class="dag" width=${g.width} height=${g.height} viewBox=${`0 0 ${g.width} ${g.height}`} role="img" aria-label="workflow graph">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8a94a6" /></marker></defs>
    ${g.edges.map(
      (e) => html`<path class="edge" marker-end="url(#arrow)"
        d=${`M${e.from.x + NODE_W},${e.from.y + NODE_H / 2} C${e.from.x + NODE_W + 30},${e.from.y + NODE_H / 2} ${e.to.x - 30},${e.to.y + NODE_H / 2} ${e.to.x},${e.to.y + NODE_H / 2}`} />`,
    )}
    ${g.nodes.map(({ step: s, x, y }) => html`<g class=${`node st-${s.status ?? 'def'}`} data-step=${s.name} onClick=${() => onSelect?.(s.name)}>
      <rect x=${x} y=${y} width=${NODE_W} height=${NODE_H} rx="6" />
      <text x=${x + 10} y=${y + 19} class="n">${s.name}</text>
      <text x=${x + 10} y=${y + 35} class="s">${s.agent} · ${ms(s.budgetMs)}${s.attempt !== undefined ? ` · attempt ${s.attempt}` : ''}</text>
      <text x=${x + 10} y=${y + 50} class="s" data-status-line=${s.name}>${s.status ?? (s.bound ? `≤ ${s.bound}` : '')}${s.place !== undefined ? ` · ${s.place === 'granted' ? 'granted' : `place ${s.place}`}` : ''}</text>
      ${s.compensation
        ? html`<g class=${`undo ${s.compensationStatus ? `cs-${s.compensationStatus}` : ''}`}>
            <line x1=${x + NODE_W / 2} y1=${y + NODE_H} x2=${x + NODE_W / 2} y2=${y + NODE_H + 8} />
            <rect x=${x + 8} y=${y + NODE_H + 8} width=${NODE_W - 16} height=${UNDO_H - 8} rx="4" />
            <text x=${x + 16} y=${y + NODE_H + 26} class="s">↺ ${s.compensation.agent}${s.compensationStatus ? ` · ${s.compensationStatus}` : s.compensation.bound ? ` · ≤ ${s.compensation.bound}` : ''}${s.compensationPlace !== undefined ? ` · ${s.compensationPlace === 'granted' ? 'granted' : `place ${s.compensationPlace}`}` : ''}</text>
          </g>`
        : null}
      ${s.waiting
        ? html`<text x=${x} y=${y + NODE_H + UNDO_H + 14} class="w" data-waiting=${s.name}><title>${s.waiting}</title>${s.waiting.length > 40 ? `${s.waiting.slice(0, 39)}…` : s.waiting}</text>`
        : null}
    </g>`)}
  </svg>`;
}
