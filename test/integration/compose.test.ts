/**
 * Static checks of the container set-up (docker-compose.yml, Dockerfile, .dockerignore).
 *
 * There is no Docker engine where the suites run, so nothing here starts a container: the compose
 * file is parsed and checked against the repository (the commands point at real entry points, the
 * build context exists, ...) and against the rules of docs/decisions/0005-containers.md (actors
 * scale: no container_name, no host ports; every service has a healthcheck; JetStream and AOF are
 * on, on named volumes; the actors talk to the compose hostnames; Node >= 22 base images).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const COMPOSE_PATH = join(ROOT, 'docker-compose.yml');
const DOCKERFILE_PATH = join(ROOT, 'Dockerfile');
const DOCKERIGNORE_PATH = join(ROOT, '.dockerignore');

/** Services the stack must define. */
const REQUIRED_SERVICES = ['nats', 'redis', 'scheduler', 'supervisor', 'agent', 'services'] as const;
/** Triad actors: scaled with `--scale`, so no container_name and no host ports. */
const ACTORS = ['scheduler', 'supervisor', 'agent'] as const;
/** The processes built from the Dockerfile, and the entry point each one runs. */
const APP_ENTRY_POINTS: Record<string, string> = {
  scheduler: 'apps/scheduler/dist/main.js',
  supervisor: 'apps/supervisor/dist/main.js',
  agent: 'apps/example-orders/dist/agents.js',
  services: 'apps/example-orders/dist/services/main.js',
};
/** The example's remote services as the agent reaches them, with the port variable of `services`. */
const REMOTE_SERVICE_URLS: Record<string, { portEnv: string; defaultPort: string }> = {
  INVENTORY_URL: { portEnv: 'INVENTORY_PORT', defaultPort: '7101' },
  PAYMENT_URL: { portEnv: 'PAYMENT_PORT', defaultPort: '7102' },
  SHIPPING_URL: { portEnv: 'SHIPPING_PORT', defaultPort: '7103' },
};
const DEPENDS_ON_CONDITIONS = ['service_started', 'service_healthy', 'service_completed_successfully'];
const MIN_NODE_MAJOR = 22;

type Obj = Record<string, unknown>;

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readRepoFile(path: string, what: string): string {
  if (!existsSync(path)) throw new Error(`${what} is missing: expected ${path}`);
  return readFileSync(path, 'utf8');
}

let composeCache: Obj | undefined;
/** docker-compose.yml parsed the way compose reads it (YAML merge keys `<<:` resolved). */
function compose(): Obj {
  if (composeCache) return composeCache;
  const text = readRepoFile(COMPOSE_PATH, 'docker-compose.yml');
  let doc: unknown;
  try {
    doc = parse(text, { merge: true });
  } catch (e) {
    throw new Error(`docker-compose.yml is not valid YAML: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!isObj(doc)) throw new Error('docker-compose.yml must be a YAML mapping at the top level');
  composeCache = doc;
  return doc;
}

function services(): Obj {
  const s = compose()['services'];
  if (!isObj(s)) throw new Error('docker-compose.yml has no `services:` mapping');
  return s;
}

function service(name: string): Obj {
  const s = services()[name];
  if (!isObj(s)) throw new Error(`docker-compose.yml has no service \`${name}\``);
  return s;
}

function serviceNames(): string[] {
  return Object.keys(services());
}

/** Services built from a Dockerfile in this repository (`build:`). */
function builtServiceNames(): string[] {
  return serviceNames().filter((n) => service(n)['build'] !== undefined);
}

/** Services that `docker compose up` starts (not limited to a profile such as `tools`). */
function isDefaultProfile(name: string): boolean {
  const profiles = service(name)['profiles'];
  return !Array.isArray(profiles) || profiles.length === 0;
}

/** A YAML scalar as compose reads it (numbers and booleans as their text; anything else as JSON). */
function scalar(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
}

/** Splits a compose string command the simple way compose does for plain words. */
function words(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) return value.map((v) => scalar(v));
  return scalar(value).trim().split(/\s+/).filter((w) => w.length > 0);
}

/** What the container runs: entrypoint followed by command. */
function argv(name: string): string[] {
  const s = service(name);
  return [...words(s['entrypoint']), ...words(s['command'])];
}

/** `environment:` as a mapping whatever the syntax (mapping or list of KEY=VALUE). */
function environment(name: string): Record<string, string | undefined> {
  const env = service(name)['environment'];
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
function dependsOn(name: string): Record<string, string> {
  const deps = service(name)['depends_on'];
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

/** Volume mounts as { source, target } whatever the syntax. */
function volumes(name: string): { source: string | undefined; target: string | undefined }[] {
  const vols = service(name)['volumes'];
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

function isNamedVolume(source: string | undefined): source is string {
  return source !== undefined && source.length > 0 && !/^[./~]/.test(source);
}

/** The host ports a `ports:` entry fixes, if any (`"8080:80"`, `"127.0.0.1:8080:80"`, `{ published: 8080 }`). */
function fixedHostPort(entry: unknown): string | undefined {
  if (isObj(entry)) {
    const published = entry['published'];
    return published === undefined || published === null || scalar(published) === '' ? undefined : scalar(published);
  }
  const spec = String(entry).replace(/\/(tcp|udp|sctp)$/, '');
  const parts = spec.split(':');
  const host = parts.length === 2 ? parts[0] : parts.length === 3 ? parts[1] : undefined;
  return host === undefined || host === '' ? undefined : host;
}

/** The healthcheck's `test` as a list of words, or undefined when there is none or it is disabled. */
function healthcheckTest(name: string): string[] | undefined {
  const hc = service(name)['healthcheck'];
  if (!isObj(hc) || hc['disable'] === true) return undefined;
  const test = hc['test'];
  const list = Array.isArray(test) ? test.map((t) => String(t)) : typeof test === 'string' ? ['CMD-SHELL', test] : [];
  if (list.length === 0 || list[0] === 'NONE') return undefined;
  return list;
}

/** Maps a command's script to the file that must exist in the repository for it to be built. */
function sourceOf(script: string): string {
  const dist = /^(apps|packages)\/([^/]+)\/dist\/(.+)\.js$/.exec(script);
  if (dist) return `${dist[1]}/${dist[2]}/src/${dist[3]}.ts`;
  return script;
}

/** The Node script a command runs: the first non-flag argument after `node`. */
function nodeScript(args: string[]): string | undefined {
  const node = args.findIndex((a) => posix.basename(a) === 'node');
  if (node < 0) return undefined;
  const script = args.slice(node + 1).find((a) => !a.startsWith('-'));
  if (script === undefined) return undefined;
  // Relative to the image's WORKDIR (/app): accept ./x and /app/x as well as x.
  return script.replace(/^\.\//, '').replace(/^\/app\//, '');
}

describe('docker-compose.yml', () => {
  it('parses, and uses the Compose Specification (no top-level `version:`)', () => {
    const doc = compose();
    expect(doc['version'], 'the top-level `version:` key is obsolete in the Compose Specification: remove it').toBeUndefined();
    expect(isObj(doc['services']), 'docker-compose.yml must have a `services:` mapping').toBe(true);
  });

  it.each(REQUIRED_SERVICES)('defines the service `%s`', (name) => {
    expect(serviceNames(), `docker-compose.yml must define the service \`${name}\``).toContain(name);
  });

  describe('built services', () => {
    it.each(Object.keys(APP_ENTRY_POINTS))('`%s` is built from this repository', (name) => {
      expect(service(name)['build'], `service \`${name}\` must have \`build:\` (the repository's Dockerfile)`).toBeDefined();
    });

    it('every `build:` has a context directory and a Dockerfile that exist', () => {
      const names = builtServiceNames();
      expect(names.length, 'no service has `build:`').toBeGreaterThan(0);
      for (const name of names) {
        const build = service(name)['build'];
        const context = typeof build === 'string' ? build : isObj(build) && typeof build['context'] === 'string' ? build['context'] : '.';
        const dockerfile = isObj(build) && typeof build['dockerfile'] === 'string' ? build['dockerfile'] : 'Dockerfile';
        const contextPath = resolve(ROOT, context);
        expect(existsSync(contextPath) && statSync(contextPath).isDirectory(), `service \`${name}\`: build context ${contextPath} is not a directory`).toBe(true);
        const dockerfilePath = resolve(contextPath, dockerfile);
        expect(existsSync(dockerfilePath), `service \`${name}\`: Dockerfile ${dockerfilePath} does not exist`).toBe(true);
      }
    });

    it.each(Object.entries(APP_ENTRY_POINTS))('`%s` runs node %s', (name, entry) => {
      const args = argv(name);
      const script = nodeScript(args);
      expect(script, `service \`${name}\`: command ${JSON.stringify(args)} does not run \`node <script>.js\``).toBeDefined();
      expect(script, `service \`${name}\` must run ${entry}, not ${String(script)}`).toBe(entry);
    });

    it('every built service runs a script whose source exists in the repository', () => {
      const problems: string[] = [];
      for (const name of builtServiceNames()) {
        const args = argv(name);
        const script = nodeScript(args);
        if (script === undefined || !script.endsWith('.js')) {
          problems.push(`\`${name}\`: command ${JSON.stringify(args)} does not run \`node <script>.js\``);
          continue;
        }
        const source = sourceOf(script);
        if (!existsSync(join(ROOT, source))) {
          problems.push(
            source === script
              ? `\`${name}\` runs ${script}, which does not exist in the repository`
              : `\`${name}\` runs ${script}, but its TypeScript source ${source} does not exist`,
          );
        }
      }
      expect(problems, `commands that point at nothing:\n  ${problems.join('\n  ')}`).toEqual([]);
    });

    it('the CLI entry point apps/cli/bin/triad.js exists (the image default command and the `cli` tool run it)', () => {
      expect(existsSync(join(ROOT, 'apps/cli/bin/triad.js')), 'apps/cli/bin/triad.js does not exist').toBe(true);
    });

    it.each(Object.keys(APP_ENTRY_POINTS))('`%s` restarts unless stopped', (name) => {
      expect(service(name)['restart'], `service \`${name}\` should have \`restart: unless-stopped\``).toBe('unless-stopped');
    });
  });

  describe('scaling', () => {
    it.each(ACTORS)('actor `%s` has no container_name and no host ports (so `--scale` works)', (name) => {
      const s = service(name);
      expect(s['container_name'], `actor \`${name}\` must not set container_name: it prevents \`docker compose up --scale ${name}=N\``).toBeUndefined();
      const ports = s['ports'];
      expect(
        ports === undefined || (Array.isArray(ports) && ports.length === 0),
        `actor \`${name}\` must not publish ports (found ${JSON.stringify(ports)}): actors listen on nothing, and fixed host ports collide when scaled`,
      ).toBe(true);
    });

    it('no service fixes a host port or container name for the example services', () => {
      const s = service('services');
      expect(s['container_name'], 'service `services` must not set container_name').toBeUndefined();
      const ports = Array.isArray(s['ports']) ? s['ports'] : [];
      const fixed = ports.map(fixedHostPort).filter((p) => p !== undefined);
      expect(fixed, `service \`services\` must stay internal: no fixed host ports (found ${JSON.stringify(ports)})`).toEqual([]);
    });
  });

  describe('health', () => {
    it('every service started by `docker compose up` has a healthcheck', () => {
      const missing = serviceNames().filter((n) => isDefaultProfile(n) && healthcheckTest(n) === undefined);
      expect(missing, `services without a healthcheck: ${missing.join(', ')}`).toEqual([]);
    });

    it('tool services (profiles only) declare their healthcheck, even if it is `disable: true`', () => {
      const undeclared = serviceNames().filter((n) => !isDefaultProfile(n) && !isObj(service(n)['healthcheck']));
      expect(undeclared, `profile-only services with no \`healthcheck:\` at all: ${undeclared.join(', ')}`).toEqual([]);
    });

    it('no healthcheck contains a `$` that compose would interpolate (write `$$`)', () => {
      const bad: string[] = [];
      for (const name of serviceNames()) {
        const test = healthcheckTest(name);
        if (test === undefined) continue;
        for (const word of test) if (word.replace(/\$\$/g, '').includes('$')) bad.push(`\`${name}\`: ${word}`);
      }
      expect(bad, `unescaped $ in healthchecks (compose substitutes them from the host environment):\n  ${bad.join('\n  ')}`).toEqual([]);
    });

    it.each(ACTORS)('actor `%s` sets TRIAD_HEALTH_FILE and its healthcheck checks that file is fresh', (name) => {
      const file = environment(name)['TRIAD_HEALTH_FILE'];
      expect(file, `actor \`${name}\` must set TRIAD_HEALTH_FILE (the heartbeat its healthcheck reads)`).toBeTruthy();
      const test = (healthcheckTest(name) ?? []).join(' ');
      expect(test, `actor \`${name}\`: the healthcheck must read the heartbeat file ${String(file)}`).toContain(String(file));
      expect(test, `actor \`${name}\`: the healthcheck must check the heartbeat's age (stat), not only that it exists`).toMatch(/stat/);
    });
  });

  describe('dependencies', () => {
    it('every depends_on names an existing service, with a valid condition', () => {
      const names = serviceNames();
      const problems: string[] = [];
      for (const name of names) {
        for (const [dep, condition] of Object.entries(dependsOn(name))) {
          if (!names.includes(dep)) problems.push(`\`${name}\` depends on \`${dep}\`, which is not a service`);
          if (!DEPENDS_ON_CONDITIONS.includes(condition)) problems.push(`\`${name}\` -> \`${dep}\`: unknown condition ${condition}`);
          if (condition === 'service_healthy' && names.includes(dep) && healthcheckTest(dep) === undefined) {
            problems.push(`\`${name}\` waits for \`${dep}\` to be healthy, but \`${dep}\` has no healthcheck`);
          }
        }
      }
      expect(problems, `depends_on problems:\n  ${problems.join('\n  ')}`).toEqual([]);
    });

    it.each(Object.keys(APP_ENTRY_POINTS))('`%s` waits for healthy nats and redis', (name) => {
      const deps = dependsOn(name);
      expect(deps['nats'], `\`${name}\` must depend on nats with condition: service_healthy`).toBe('service_healthy');
      expect(deps['redis'], `\`${name}\` must depend on redis with condition: service_healthy`).toBe('service_healthy');
    });

    it('`agent` waits for healthy example services', () => {
      expect(dependsOn('agent')['services'], '`agent` must depend on `services` with condition: service_healthy').toBe('service_healthy');
    });
  });

  describe('configuration', () => {
    it.each(ACTORS)('actor `%s` reaches NATS and Redis by their compose hostnames', (name) => {
      const env = environment(name);
      const natsUrl = env['NATS_URL'];
      const redisUrl = env['REDIS_URL'];
      expect(natsUrl, `actor \`${name}\` must set NATS_URL (the default 127.0.0.1 is the container itself)`).toBeTruthy();
      expect(redisUrl, `actor \`${name}\` must set REDIS_URL (the default 127.0.0.1 is the container itself)`).toBeTruthy();
      const nats = new URL(String(natsUrl));
      const redis = new URL(String(redisUrl));
      expect(`${nats.protocol}//${nats.hostname}:${nats.port || '4222'}`, `actor \`${name}\`: NATS_URL=${String(natsUrl)} must point at the nats service`).toBe('nats://nats:4222');
      expect(`${redis.protocol}//${redis.hostname}:${redis.port || '6379'}`, `actor \`${name}\`: REDIS_URL=${String(redisUrl)} must point at the redis service`).toBe('redis://redis:6379');
    });

    it('`agent` reaches the example services on the ports `services` listens on', () => {
      const agentEnv = environment('agent');
      const servicesEnv = environment('services');
      expect(servicesEnv['SERVICES_HOST'], '`services` must listen on all interfaces (SERVICES_HOST=0.0.0.0) to be reachable from the agents').toBe('0.0.0.0');
      for (const [variable, { portEnv, defaultPort }] of Object.entries(REMOTE_SERVICE_URLS)) {
        const value = agentEnv[variable];
        expect(value, `\`agent\` must set ${variable}`).toBeTruthy();
        const url = new URL(String(value));
        expect(url.hostname, `\`agent\`: ${variable}=${String(value)} must use the hostname \`services\``).toBe('services');
        const port = servicesEnv[portEnv] ?? defaultPort;
        expect(url.port, `\`agent\`: ${variable}=${String(value)} must use port ${port} (${portEnv} of \`services\`)`).toBe(port);
      }
    });
  });

  describe('state services', () => {
    it('nats runs JetStream, stores it on a named volume, and exposes monitoring for its healthcheck', () => {
      const args = argv('nats');
      expect(args.includes('-js') || args.includes('--jetstream'), `nats must run with -js (JetStream); command is ${JSON.stringify(args)}`).toBe(true);
      const sd = Math.max(args.indexOf('-sd'), args.indexOf('--store_dir'));
      expect(sd, 'nats must set its JetStream store directory with -sd <dir>').toBeGreaterThanOrEqual(0);
      const storeDir = args[sd + 1];
      const mount = volumes('nats').find((v) => v.target === storeDir);
      expect(mount, `nats: the JetStream store dir ${String(storeDir)} must be a volume mount`).toBeDefined();
      expect(isNamedVolume(mount?.source), `nats: ${String(storeDir)} must be on a named volume (found ${String(mount?.source)})`).toBe(true);
      expect(Object.keys((compose()['volumes'] as Obj | undefined) ?? {}), `nats: volume ${String(mount?.source)} must be declared under top-level \`volumes:\``).toContain(mount?.source);
      const m = Math.max(args.indexOf('-m'), args.indexOf('--http_port'));
      expect(m, 'nats must enable the monitoring port (-m 8222) used by its healthcheck').toBeGreaterThanOrEqual(0);
      expect((healthcheckTest('nats') ?? []).join(' '), `nats: the healthcheck must query the monitoring port ${String(args[m + 1])}`).toContain(`:${String(args[m + 1])}/healthz`);
    });

    it('redis persists with appendonly yes on a named volume at /data', () => {
      const args = argv('redis');
      const aof = args.indexOf('--appendonly');
      expect(aof >= 0 && args[aof + 1] === 'yes', `redis must run with --appendonly yes; command is ${JSON.stringify(args)}`).toBe(true);
      const mount = volumes('redis').find((v) => v.target === '/data');
      expect(mount, 'redis: /data must be a volume mount').toBeDefined();
      expect(isNamedVolume(mount?.source), `redis: /data must be on a named volume (found ${String(mount?.source)})`).toBe(true);
      expect(Object.keys((compose()['volumes'] as Obj | undefined) ?? {}), `redis: volume ${String(mount?.source)} must be declared under top-level \`volumes:\``).toContain(mount?.source);
    });
  });
});

/** Base images of the Dockerfile's FROM lines, global ARG defaults substituted; FROM <earlier stage> left out. */
function fromLines(text: string): { line: string; image: string; stage: string | undefined }[] {
  const args: Record<string, string> = {};
  const stages: string[] = [];
  const out: { line: string; image: string; stage: string | undefined }[] = [];
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  for (const raw of lines) {
    const line = raw.trim();
    const arg = /^ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)/i.exec(line);
    if (arg?.[1] && arg[2] && stages.length === 0 && out.length === 0) args[arg[1]] = arg[2].replace(/^["']|["']$/g, '');
    const from = /^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (!from?.[1]) continue;
    const image = from[1].replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}?/g, (_m, n: string) => args[n] ?? '');
    // `FROM build AS x` starts from an earlier stage, not from a base image.
    if (!stages.includes(image.toLowerCase())) out.push({ line, image, stage: from[2] });
    if (from[2]) stages.push(from[2].toLowerCase());
  }
  return out;
}

/** The instructions of the last stage (the image that runs). */
function finalStage(text: string): string[] {
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/).map((l) => l.trim());
  const last = lines.map((l) => /^FROM\s/i.test(l)).lastIndexOf(true);
  return lines.slice(Math.max(last, 0)).filter((l) => l.length > 0 && !l.startsWith('#'));
}

describe('Dockerfile', () => {
  it('builds on Node >= 22 base images', () => {
    const froms = fromLines(readRepoFile(DOCKERFILE_PATH, 'Dockerfile'));
    expect(froms.length, 'the Dockerfile has no FROM line').toBeGreaterThan(0);
    for (const { line, image } of froms) {
      const ref = /^(?:docker\.io\/)?(?:library\/)?([^:@]+)(?::([^@]+))?/.exec(image);
      expect(ref?.[1], `${line}: the base image must be the official node image (found ${image})`).toBe('node');
      const major = /^(\d+)/.exec(ref?.[2] ?? '');
      expect(major, `${line}: pin a numeric Node major in the tag (e.g. node:24-bookworm-slim), found ${image}`).not.toBeNull();
      expect(Number(major?.[1]), `${line}: Node ${String(major?.[1])} is older than ${MIN_NODE_MAJOR}`).toBeGreaterThanOrEqual(MIN_NODE_MAJOR);
    }
  });

  it('is multi-stage, and the runtime stage runs as a non-root user with NODE_ENV=production', () => {
    const text = readRepoFile(DOCKERFILE_PATH, 'Dockerfile');
    expect(text.match(/^FROM\s/gim)?.length ?? 0, 'the Dockerfile must be multi-stage (a build stage and a runtime stage)').toBeGreaterThanOrEqual(2);
    const stage = finalStage(text);
    const users = stage.filter((l) => /^USER\s/i.test(l));
    expect(users.length, 'the runtime stage must set USER (non-root)').toBeGreaterThan(0);
    expect(users[users.length - 1], 'the runtime stage must not run as root').not.toMatch(/^USER\s+(root|0)(:|\s|$)/i);
    expect(stage.some((l) => /^ENV\s.*\bNODE_ENV[= ]\s*"?production"?/i.test(l)), 'the runtime stage must set ENV NODE_ENV=production').toBe(true);
  });
});

describe('.dockerignore', () => {
  it('keeps installed and generated files out of the build context', () => {
    const patterns = readRepoFile(DOCKERIGNORE_PATH, '.dockerignore')
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l.length > 0 && !l.startsWith('#'));
    for (const name of ['node_modules', 'dist', '.git', '.turbo']) {
      expect(
        patterns.some((p) => p === name || p === `**/${name}`),
        `.dockerignore must exclude ${name} (use **/${name} to match in every workspace)`,
      ).toBe(true);
    }
  });
});
