/**
 * The CLI run from the repository finds `npm start`'s operator credentials by itself: when no NATS
 * credentials are set and NATS_URL is the server `npm start` secured, it uses `.triad/auth/operator.env`
 * of the workspace root — its seed, namespace and client id, unless those are set (decision 0016).
 * `npm start` prints what this module finds, so what it says is what the CLI does.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_NATS_URL } from '@triad/settings';

const AUTH_VARIABLES = ['NATS_CREDS', 'NATS_NKEY_SEED', 'NATS_USER', 'NATS_PASSWORD', 'NATS_TOKEN'] as const;

/** Where `npm start` keeps its servers' data, logs and credentials, under the workspace root. */
export const LOCAL_DATA_FOLDER = '.triad';

/**
 * The workspace root above `from`: the nearest folder whose package.json declares `workspaces` (a
 * workspace's own package.json, or a turbo.json, does not count). Undefined when there is none — the
 * CLI installed on its own.
 */
export function workspaceRoot(from: string = dirname(fileURLToPath(import.meta.url))): string | undefined {
  let dir = from;
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { workspaces?: unknown };
        if (pkg.workspaces !== undefined) return dir;
      } catch {
        // An unreadable package.json is not the root; keep looking up.
      }
    }
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** `<workspace root>/.triad/auth/operator.env`, whether or not it exists; undefined outside a workspace. */
export function localOperatorFile(root: string | undefined): string | undefined {
  return root === undefined ? undefined : join(root, LOCAL_DATA_FOLDER, 'auth', 'operator.env');
}

function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined) env[m[1]] = m[2];
  }
  return env;
}

/** What the CLI does about npm start's operator identity in an environment: uses `file` (with `settings`), or not, and why. */
export type LocalOperatorLookup =
  | { used: true; file: string; settings: Record<string, string> }
  | { used: false; file: string | undefined; why: string };

/** Looks for npm start's operator identity in `file` as the CLI does with `env` (already merged with the flags). */
export function lookupLocalOperator(env: NodeJS.ProcessEnv, file: string | undefined): LocalOperatorLookup {
  const given = AUTH_VARIABLES.find((v) => (env[v] ?? '') !== '');
  if (given) return { used: false, file, why: `${given} is set` };
  if (file === undefined) return { used: false, file, why: 'the CLI is not run from a Triad repository' };
  if (!existsSync(file)) return { used: false, file, why: `${file} does not exist (npm start writes it when it secures the servers it starts)` };
  let local: Record<string, string>;
  try {
    local = parseEnv(readFileSync(file, 'utf8'));
  } catch (e) {
    return { used: false, file, why: `${file} cannot be read (${(e as Error).message})` };
  }
  const url = (env['NATS_URL'] ?? '').trim() || DEFAULT_NATS_URL;
  if (local['NATS_URL'] !== url) return { used: false, file, why: `it is for NATS_URL=${local['NATS_URL'] ?? '(none)'}, not ${url}` };
  if (local['NATS_NKEY_SEED'] === undefined) return { used: false, file, why: `${file} names no NATS_NKEY_SEED` };
  const ns = env['TRIAD_NAMESPACE'];
  if (ns !== undefined && ns !== '' && ns !== local['TRIAD_NAMESPACE']) return { used: false, file, why: `it is for namespace ${local['TRIAD_NAMESPACE'] ?? '(none)'}, not ${ns}` };
  return {
    used: true,
    file,
    settings: {
      NATS_NKEY_SEED: local['NATS_NKEY_SEED'],
      ...(ns ? {} : local['TRIAD_NAMESPACE'] ? { TRIAD_NAMESPACE: local['TRIAD_NAMESPACE'] } : {}),
      ...(env['TRIAD_CLIENT_ID'] ? {} : local['TRIAD_CLIENT_ID'] ? { TRIAD_CLIENT_ID: local['TRIAD_CLIENT_ID'] } : {}),
    },
  };
}

/** The settings to add to `env` (already merged with the flags), or an empty object. */
export function localOperatorSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  const found = lookupLocalOperator(env, localOperatorFile(workspaceRoot()));
  return found.used ? found.settings : {};
}
