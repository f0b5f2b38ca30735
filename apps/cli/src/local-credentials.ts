/**
 * The CLI run from the repository finds `npm start`'s operator credentials by itself: when no NATS
 * credentials are set and NATS_URL is the server `npm start` secured, it uses `.triad/auth/operator.env`
 * (TRIAD_DATA_DIR/auth when set) — its seed, namespace and client id, unless those are set (decision 0016).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_NATS_URL } from '@triad/protocol';

const AUTH_VARIABLES = ['NATS_CREDS', 'NATS_NKEY_SEED', 'NATS_USER', 'NATS_PASSWORD', 'NATS_TOKEN'] as const;

/** The repository root above this file (apps/cli/dist/…), or undefined when the CLI is installed elsewhere. */
function repositoryRoot(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'turbo.json'))) return dir;
    dir = dirname(dir);
  }
  return undefined;
}

function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined) env[m[1]] = m[2];
  }
  return env;
}

/** The settings to add to `env` (already merged with the flags), or an empty object. */
export function localOperatorSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  if (AUTH_VARIABLES.some((v) => (env[v] ?? '') !== '')) return {};
  const root = repositoryRoot();
  const dataDir = env['TRIAD_DATA_DIR'] ?? (root ? join(root, '.triad') : undefined);
  if (dataDir === undefined) return {};
  const file = join(dataDir, 'auth', 'operator.env');
  if (!existsSync(file)) return {};
  let local: Record<string, string>;
  try {
    local = parseEnv(readFileSync(file, 'utf8'));
  } catch {
    return {};
  }
  const url = (env['NATS_URL'] ?? '').trim() || DEFAULT_NATS_URL;
  if (local['NATS_URL'] !== url || local['NATS_NKEY_SEED'] === undefined) return {};
  const ns = env['TRIAD_NAMESPACE'];
  if (ns !== undefined && ns !== '' && ns !== local['TRIAD_NAMESPACE']) return {};
  return {
    NATS_NKEY_SEED: local['NATS_NKEY_SEED'],
    ...(ns ? {} : local['TRIAD_NAMESPACE'] ? { TRIAD_NAMESPACE: local['TRIAD_NAMESPACE'] } : {}),
    ...(env['TRIAD_CLIENT_ID'] ? {} : local['TRIAD_CLIENT_ID'] ? { TRIAD_CLIENT_ID: local['TRIAD_CLIENT_ID'] } : {}),
  };
}
