// Reads docker-compose.yml the way Compose does (YAML merge keys resolved, `${VAR:-default}` interpolated
// on request) and answers what a service runs, with which environment, after which dependencies.
import { existsSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';

export type Obj = Record<string, unknown>;

export function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A YAML scalar as compose reads it (numbers and booleans as their text; anything else as JSON). */
export function scalar(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
}

/** Splits a compose string command the simple way compose does for plain words. */
export function words(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value.map((v) => scalar(v));
  return scalar(value).trim().split(/\s+/).filter((w) => w.length > 0);
}

/**
 * Compose's variable substitution of one string: `$$` is a literal `$`; `${VAR}`, `$VAR`, `${VAR:-default}`
 * (default when unset or empty) and `${VAR-default}` (default when unset) read `vars`; an unset variable
 * without a default becomes the empty string, as compose does (with a warning).
 */
export function interpolate(text: string, vars: Readonly<Record<string, string | undefined>>): string {
  return text.replace(/\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (match, braced?: string, op?: string, fallback?: string, bare?: string) => {
    if (match === '$$') return '$';
    const name = braced ?? bare ?? '';
    const value = vars[name];
    if (op === ':-') return value === undefined || value === '' ? (fallback ?? '') : value;
    if (op === '-') return value === undefined ? (fallback ?? '') : value;
    return value ?? '';
  });
}

/** Every string in a parsed document interpolated (keys stay as they are, as in compose). */
function interpolateDeep(value: unknown, vars: Readonly<Record<string, string | undefined>>): unknown {
  if (typeof value === 'string') return interpolate(value, vars);
  if (Array.isArray(value)) return value.map((v) => interpolateDeep(v, vars));
  if (isObj(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateDeep(v, vars)]));
  return value;
}

export class ComposeFile {
  private constructor(readonly doc: Obj) {}

  /** The file parsed with merge keys resolved; with `vars`, interpolated as `docker compose` would with that host environment. */
  static read(path: string, vars?: Readonly<Record<string, string | undefined>>): ComposeFile {
    if (!existsSync(path)) throw new Error(`docker-compose.yml is missing: expected ${path}`);
    let doc: unknown;
    try {
      doc = parse(readFileSync(path, 'utf8'), { merge: true });
    } catch (e) {
      throw new Error(`docker-compose.yml is not valid YAML: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (!isObj(doc)) throw new Error('docker-compose.yml must be a YAML mapping at the top level');
    return new ComposeFile(vars === undefined ? doc : (interpolateDeep(doc, vars) as Obj));
  }

  services(): Obj {
    const s = this.doc['services'];
    if (!isObj(s)) throw new Error('docker-compose.yml has no `services:` mapping');
    return s;
  }

  service(name: string): Obj {
    const s = this.services()[name];
    if (!isObj(s)) throw new Error(`docker-compose.yml has no service \`${name}\``);
    return s;
  }

  serviceNames(): string[] {
    return Object.keys(this.services());
  }

  /** Services built from a Dockerfile in this repository (`build:`). */
  builtServiceNames(): string[] {
    return this.serviceNames().filter((n) => this.service(n)['build'] !== undefined);
  }

  /** Services that `docker compose up` starts (not limited to a profile such as `tools`). */
  isDefaultProfile(name: string): boolean {
    const profiles = this.service(name)['profiles'];
    return !Array.isArray(profiles) || profiles.length === 0;
  }

  /** What the container runs: entrypoint followed by command (or by `args`, as `docker compose run <service> args...` does). */
  argv(name: string, args?: readonly string[]): string[] {
    const s = this.service(name);
    return [...words(s['entrypoint']), ...(args ?? words(s['command']))];
  }

  /** `environment:` as a mapping whatever the syntax (mapping or list of KEY=VALUE). */
  environment(name: string): Record<string, string | undefined> {
    const env = this.service(name)['environment'];
    const out: Record<string, string | undefined> = {};
    if (Array.isArray(env)) {
      for (const entry of env) {
        const text = String(entry);
        const eq = text.indexOf('=');
        if (eq < 0) out[text] = undefined;
        else out[text.slice(0, eq)] = text.slice(eq + 1);
      }
    } else if (isObj(env)) {
      for (const [k, v] of Object.entries(env)) out[k] = v === null || v === undefined ? undefined : scalar(v);
    }
    return out;
  }

  /** `depends_on:` as name -> condition whatever the syntax. */
  dependsOn(name: string): Record<string, string> {
    const deps = this.service(name)['depends_on'];
    const out: Record<string, string> = {};
    if (Array.isArray(deps)) {
      for (const d of deps) out[String(d)] = 'service_started';
    } else if (isObj(deps)) {
      for (const [k, v] of Object.entries(deps)) {
        out[k] = isObj(v) && typeof v['condition'] === 'string' ? v['condition'] : 'service_started';
      }
    }
    return out;
  }

  /** The container ports a service listens on, as declared by `expose:` and the container side of `ports:`. */
  containerPorts(name: string): number[] {
    const s = this.service(name);
    const exposed = Array.isArray(s['expose']) ? s['expose'].map((p) => scalar(p)) : [];
    const published = Array.isArray(s['ports'])
      ? s['ports'].map((p) => (isObj(p) ? scalar(p['target']) : (String(p).replace(/\/(tcp|udp|sctp)$/, '').split(':').pop() ?? '')))
      : [];
    return [...new Set([...exposed, ...published].map((p) => Number(p.replace(/\/(tcp|udp|sctp)$/, ''))).filter((p) => Number.isInteger(p) && p > 0))];
  }

  /** Volume mounts as { source, target } whatever the syntax. */
  volumes(name: string): { source: string | undefined; target: string | undefined }[] {
    const vols = this.service(name)['volumes'];
    if (!Array.isArray(vols)) return [];
    return vols.map((v) => {
      if (isObj(v)) {
        return {
          source: typeof v['source'] === 'string' ? v['source'] : undefined,
          target: typeof v['target'] === 'string' ? v['target'] : undefined,
        };
      }
      const parts = String(v).split(':');
      return parts.length === 1 ? { source: undefined, target: parts[0] } : { source: parts[0], target: parts[1] };
    });
  }

  /** The healthcheck's `test` as a list of words, or undefined when there is none or it is disabled. */
  healthcheckTest(name: string): string[] | undefined {
    const hc = this.service(name)['healthcheck'];
    if (!isObj(hc) || hc['disable'] === true) return undefined;
    const test = hc['test'];
    const list = Array.isArray(test) ? test.map((t) => String(t)) : typeof test === 'string' ? ['CMD-SHELL', test] : [];
    if (list.length === 0 || list[0] === 'NONE') return undefined;
    return list;
  }
}
