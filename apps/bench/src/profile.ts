/**
 * Summarises V8 CPU profiles (`node --cpu-prof`): self time per function and per package, computed
 * from the samples and their time deltas, so the hot spots can be read without opening DevTools.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface HotSpot {
  name: string;
  where: string;
  selfMs: number;
  /** Share of the busy (non-idle) time. */
  pct: number;
}

export interface ProfileSummary {
  file: string;
  process: string;
  wallMs: number;
  busyMs: number;
  gcMs: number;
  functions: HotSpot[];
  packages: HotSpot[];
  /** Functions of Triad's own packages by inclusive time (the synchronous part of what they call). */
  triad: HotSpot[];
}

/** Which package (or runtime part) a script URL belongs to. */
export function packageOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return 'node: (runtime)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    const scoped = rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? '?');
    // Workspace packages are symlinked into node_modules as @triad/*.
    return scoped;
  }
  const ws = /\/(packages|apps)\/([^/]+)\//.exec(url);
  if (ws) return ws[1] === 'packages' ? `@triad/${ws[2]}` : `apps/${ws[2]}`;
  return url;
}

function shortWhere(url: string, line: number): string {
  if (!url) return '';
  const m = /\/((?:packages|apps)\/.*|node_modules\/.*)$/.exec(url);
  const path = m?.[1] ?? url.replace(/^file:\/\//, '');
  return `${path.replace(/^node_modules\//, '')}:${line + 1}`;
}

export function summariseProfile(file: string, top = 20): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  // A sample's duration is the gap to the next sample (the last one gets the mean gap).
  const meanGap = deltas.length > 0 ? deltas.reduce((a, b) => a + b, 0) / deltas.length : 0;
  for (let i = 0; i < samples.length; i++) {
    const id = samples[i] as number;
    const us = deltas[i + 1] ?? meanGap;
    self.set(id, (self.get(id) ?? 0) + us);
  }
  let idle = 0;
  let gc = 0;
  let total = 0;
  const fns = new Map<string, HotSpot>();
  const pkgs = new Map<string, HotSpot>();
  for (const [id, us] of self) {
    const n = byId.get(id);
    if (!n) continue;
    const ms = us / 1000;
    total += ms;
    const { functionName, url, lineNumber } = n.callFrame;
    if (functionName === '(idle)') {
      idle += ms;
      continue;
    }
    if (functionName === '(garbage collector)') gc += ms;
    const name = functionName || '(anonymous)';
    const where = shortWhere(url, lineNumber);
    const key = `${name}@${where}`;
    const f = fns.get(key) ?? { name, where, selfMs: 0, pct: 0 };
    f.selfMs += ms;
    fns.set(key, f);
    const pkg = packageOf(url, functionName);
    const g = pkgs.get(pkg) ?? { name: pkg, where: '', selfMs: 0, pct: 0 };
    g.selfMs += ms;
    pkgs.set(pkg, g);
  }
  const busy = total - idle;
  const triad = inclusiveTriad(p, byId, self);
  const rank = (m: Map<string, HotSpot>, n: number): HotSpot[] =>
    [...m.values()]
      .map((h) => ({ ...h, pct: busy > 0 ? (100 * h.selfMs) / busy : 0 }))
      .sort((a, b) => b.selfMs - a.selfMs)
      .slice(0, n);
  return {
    file,
    process: basename(file).replace(/\.cpuprofile$/, ''),
    wallMs: (p.endTime - p.startTime) / 1000,
    busyMs: busy,
    gcMs: gc,
    functions: rank(fns, top),
    packages: rank(pkgs, 12),
    triad: rank(triad, 15),
  };
}

/**
 * Inclusive time of each function in packages/ (Triad's code), counting a node only when no ancestor is
 * the same function, so recursion is not counted twice.
 */
function inclusiveTriad(p: CpuProfile, byId: Map<number, ProfileNode>, self: Map<number, number>): Map<string, HotSpot> {
  const total = new Map<number, number>();
  const totalOf = (id: number): number => {
    const known = total.get(id);
    if (known !== undefined) return known;
    const n = byId.get(id);
    let t = self.get(id) ?? 0;
    for (const c of n?.children ?? []) t += totalOf(c);
    total.set(id, t);
    return t;
  };
  const out = new Map<string, HotSpot>();
  const root = p.nodes[0];
  if (!root) return out;
  // Iterative walk (deep async stacks would overflow a recursive one) carrying the keys on the path.
  const stack: { id: number; path: ReadonlySet<string> }[] = [{ id: root.id, path: new Set() }];
  while (stack.length > 0) {
    const { id, path } = stack.pop() as { id: number; path: ReadonlySet<string> };
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    let next = path;
    if (/\/packages\/[^/]+\/dist\//.test(url)) {
      const key = `${functionName || '(anonymous)'}@${shortWhere(url, lineNumber)}`;
      if (!path.has(key)) {
        const h = out.get(key) ?? { name: functionName || '(anonymous)', where: shortWhere(url, lineNumber), selfMs: 0, pct: 0 };
        h.selfMs += totalOf(id) / 1000;
        out.set(key, h);
        next = new Set([...path, key]);
      }
    }
    for (const c of n.children ?? []) stack.push({ id: c, path: next });
  }
  return out;
}

export function summariseDir(dir: string, top = 20): ProfileSummary[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()
    .map((f) => summariseProfile(join(dir, f), top));
}
