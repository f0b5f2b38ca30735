/** Finds the server binaries npm start, the bench and the tests need, or says exactly how to install them. */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export type ServerBinary = 'nats-server' | 'redis-server' | 'redis-cli';

const INSTALL_HINTS: Record<ServerBinary, string> = {
  'nats-server':
    'Debian/Ubuntu: `apt-get install -y nats-server` (installs /usr/sbin/nats-server); ' +
    'elsewhere: download a release from https://github.com/nats-io/nats-server/releases and put `nats-server` on PATH',
  'redis-server':
    'Debian/Ubuntu: `apt-get install -y redis-server` (installs /usr/bin/redis-server); ' +
    'elsewhere: build a release from https://redis.io/downloads/ (`make`) and put `src/redis-server` on PATH',
  'redis-cli':
    'Debian/Ubuntu: `apt-get install -y redis-tools` (installs /usr/bin/redis-cli; redis-server depends on it); ' +
    'elsewhere: it is built with redis-server (`src/redis-cli`): put it on PATH',
};

// Debian installs nats-server into /usr/sbin, which is not on the PATH of most non-root shells.
const SBIN_FALLBACKS = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

const resolved = new Map<ServerBinary, string>();

/** What the error says the binary is for, and what else the user may do instead of installing it. */
export interface BinaryPurpose {
  /** e.g. "by the integration tests" (the default), "by npm start". */
  by?: string;
  /** e.g. "set NATS_URL to a running server". */
  orElse?: string;
}

/** Absolute path of `name` from PATH (then the sbin directories); throws with install instructions. */
export function requireBinary(name: ServerBinary, purpose: BinaryPurpose = {}): string {
  const cached = resolved.get(name);
  if (cached !== undefined) return cached;
  const pathDirs = (process.env['PATH'] ?? '').split(delimiter).filter((dir) => dir !== '');
  const found = findBinary(name, [...pathDirs, ...SBIN_FALLBACKS], purpose);
  resolved.set(name, found);
  return found;
}

/** The first executable `name` in `dirs`; exported separately so the error text can be tested. */
export function findBinary(name: ServerBinary, dirs: readonly string[], purpose: BinaryPurpose = {}): string {
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  throw new Error(
    `${name} is required ${purpose.by ?? 'by the integration tests'} but was not found on PATH ` +
      `(searched: ${dirs.join(delimiter) || '<empty>'}). Install it: ${INSTALL_HINTS[name]}${purpose.orElse ? `; or ${purpose.orElse}` : ''}.`,
  );
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
