/**
 * Static checks of the container set-up (docker-compose.yml, Dockerfile, .dockerignore).
 *
 * There is no Docker engine where the suites run, so nothing here starts a container: the compose
 * file is parsed and checked against the repository (the commands point at real entry points, the
 * build context exists, ...) and against the rules of docs/decisions/0005-containers.md (actors
 * scale: no container_name, no host ports; every service has a healthcheck; JetStream and AOF are
 * on, on named volumes; the actors talk to the compose hostnames; every service URL the example's
 * agents read, found from the code, reaches a service of the stack; Node >= 22 base images).
 * test/integration/compose-processes.test.ts runs the file's commands.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { SERVICE_ENDPOINTS, serviceUrlsFromEnv } from '@triad/example-orders';
import { ComposeFile, isObj, scalar, type Obj } from '../support/compose.js';

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
/**
 * The `*_URL` variables the example's agents read, found by running serviceUrlsFromEnv (what
 * apps/example-orders/src/agents.ts calls) on an environment that records every variable it is asked for.
 */
const AGENT_URL_VARIABLES = ((): string[] => {
  const read = new Set<string>();
  const recorder = new Proxy<NodeJS.ProcessEnv>({}, {
    get: (_target, key) => {
      if (typeof key === 'string') read.add(key);
      return undefined;
    },
  });
  serviceUrlsFromEnv(recorder);
  return [...read].filter((v) => v.endsWith('_URL'));
})();
const DEPENDS_ON_CONDITIONS = ['service_started', 'service_healthy', 'service_completed_successfully'];
const MIN_NODE_MAJOR = 22;

function readRepoFile(path: string, what: string): string {
  if (!existsSync(path)) throw new Error(`${what} is missing: expected ${path}`);
  return readFileSync(path, 'utf8');
}

let composeCache: ComposeFile | undefined;
/** docker-compose.yml parsed the way compose reads it (YAML merge keys `<<:` resolved), not interpolated. */
function file(): ComposeFile {
  composeCache ??= ComposeFile.read(COMPOSE_PATH);
  return composeCache;
}
const compose = (): Obj => file().doc;
const service = (name: string): Obj => file().service(name);
const serviceNames = (): string[] => file().serviceNames();
const builtServiceNames = (): string[] => file().builtServiceNames();
const isDefaultProfile = (name: string): boolean => file().isDefaultProfile(name);
const argv = (name: string): string[] => file().argv(name);
const environment = (name: string): Record<string, string | undefined> => file().environment(name);
const dependsOn = (name: string): Record<string, string> => file().dependsOn(name);
const volumes = (name: string): { source: string | undefined; target: string | undefined }[] => file().volumes(name);
const healthcheckTest = (name: string): string[] | undefined => file().healthcheckTest(name);

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

    it.each(ACTORS)('actor `%s` serves its HTTP surface on TRIAD_HTTP_PORT, exposed in the network, and its healthcheck asks /readyz there', (name) => {
      const port = environment(name)['TRIAD_HTTP_PORT'];
      expect(port, `actor \`${name}\` must set TRIAD_HTTP_PORT (where it serves /metrics, /healthz and /readyz; decision 0013)`).toMatch(/^\d+$/);
      expect(file().containerPorts(name), `actor \`${name}\` must \`expose\` its TRIAD_HTTP_PORT ${String(port)} (Prometheus scrapes it in the network)`).toContain(Number(port));
      const test = (healthcheckTest(name) ?? []).join(' ');
      expect(test, `actor \`${name}\`: the healthcheck must ask /readyz (ready = connected and serving)`).toContain('/readyz');
      expect(test, `actor \`${name}\`: the healthcheck must reach the port the actor serves on (TRIAD_HTTP_PORT)`).toContain('TRIAD_HTTP_PORT');
    });

    it.each(ACTORS)('actor `%s` still writes the heartbeat file (TRIAD_HEALTH_FILE) for set-ups that prefer it', (name) => {
      expect(environment(name)['TRIAD_HEALTH_FILE'], `actor \`${name}\` must set TRIAD_HEALTH_FILE`).toBeTruthy();
    });

    it('Prometheus (profile observability) scrapes every actor on its TRIAD_HTTP_PORT, with its config and the Grafana dashboard mounted from deploy/', () => {
      expect(isDefaultProfile('prometheus'), 'prometheus runs only with --profile observability').toBe(false);
      const mounted = volumes('prometheus').find((v) => v.target === '/etc/prometheus/prometheus.yml');
      expect(mounted?.source, 'prometheus must mount deploy/prometheus/prometheus.yml').toBe('./deploy/prometheus/prometheus.yml');
      const config = parseYaml(readRepoFile(join(ROOT, 'deploy/prometheus/prometheus.yml'), 'deploy/prometheus/prometheus.yml')) as {
        scrape_configs: { dns_sd_configs?: { names: string[]; port: number }[] }[];
      };
      const scraped = new Map<string, number>();
      for (const job of config.scrape_configs) for (const sd of job.dns_sd_configs ?? []) for (const n of sd.names) scraped.set(n, sd.port);
      for (const actor of ACTORS) {
        expect(scraped.get(actor), `prometheus.yml must scrape \`${actor}\` on its TRIAD_HTTP_PORT`).toBe(Number(environment(actor)['TRIAD_HTTP_PORT']));
      }
      const dashboard = volumes('grafana').find((v) => v.source === './deploy/grafana/triad.json');
      expect(dashboard, 'grafana must mount deploy/grafana/triad.json').toBeDefined();
      for (const v of [...volumes('prometheus'), ...volumes('grafana')]) {
        if (v.source?.startsWith('./')) expect(existsSync(join(ROOT, v.source)), `${v.source} is mounted but does not exist`).toBe(true);
      }
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

    it('`cli` waits for a healthy scheduler and agent (so `docker compose run --rm cli submit orders ... --wait` works on a fresh `up`)', () => {
      const deps = dependsOn('cli');
      expect(deps['scheduler'], '`cli` must depend on `scheduler` with condition: service_healthy (it creates the streams a submission goes to)').toBe('service_healthy');
      expect(deps['agent'], '`cli` must depend on `agent` with condition: service_healthy (healthy once the orders workflow is registered)').toBe('service_healthy');
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

    it('the example\'s agents read at least one service URL (so the check below checks something)', () => {
      expect(AGENT_URL_VARIABLES.length, 'serviceUrlsFromEnv read no *_URL variable: the agents find their services some other way, update this test').toBeGreaterThan(0);
    });

    it('every `*_URL` the example\'s agents read reaches a service of the stack on a port it listens on', () => {
      const agentServices = serviceNames().filter((n) => nodeScript(argv(n)) === APP_ENTRY_POINTS['agent']);
      expect(agentServices, `no service runs ${String(APP_ENTRY_POINTS['agent'])}`).not.toEqual([]);
      const problems: string[] = [];
      for (const name of agentServices) {
        const env = environment(name);
        for (const variable of AGENT_URL_VARIABLES) {
          const value = env[variable];
          if (!value) {
            problems.push(`\`${name}\` does not set ${variable}: its agents would call 127.0.0.1 inside their own container`);
            continue;
          }
          const url = new URL(value);
          const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
          const target = url.hostname;
          if (!serviceNames().includes(target) || !isDefaultProfile(target)) {
            problems.push(`\`${name}\`: ${variable}=${value} names \`${target}\`, which is not a service \`docker compose up\` starts`);
            continue;
          }
          if (!file().containerPorts(target).includes(port)) {
            problems.push(`\`${name}\`: ${variable}=${value}, but \`${target}\` does not expose port ${port} (exposes ${file().containerPorts(target).join(', ') || 'nothing'})`);
          }
          // The port the example services' process listens on for this service (services/main.ts reads the same variables).
          const endpoint = Object.values(SERVICE_ENDPOINTS).find((e) => e.urlVariable === variable);
          if (endpoint && nodeScript(argv(target)) === APP_ENTRY_POINTS['services']) {
            const listens = Number(environment(target)[endpoint.portVariable] ?? endpoint.defaultPort);
            if (listens !== port) problems.push(`\`${name}\`: ${variable}=${value}, but \`${target}\` listens for it on ${listens} (${endpoint.portVariable})`);
          }
        }
      }
      expect(problems, `service URLs that reach nothing:\n  ${problems.join('\n  ')}`).toEqual([]);
    });

    it('`services` listens on all interfaces, and its healthcheck checks every port it listens on', () => {
      const env = environment('services');
      expect(env['SERVICES_HOST'], '`services` must listen on all interfaces (SERVICES_HOST=0.0.0.0) to be reachable from the agents').toBe('0.0.0.0');
      const test = (healthcheckTest('services') ?? []).join(' ');
      const unchecked = Object.values(SERVICE_ENDPOINTS)
        .map((e) => e.portVariable)
        .filter((v) => !test.includes(v));
      expect(unchecked, `the \`services\` healthcheck does not check ${unchecked.join(', ')}`).toEqual([]);
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
