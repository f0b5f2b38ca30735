// Runs the services of a Compose file as local processes, the way `docker compose up` would run their
// containers, on a machine without a Docker engine: every service hostname becomes 127.0.0.1 and every
// container port a distinct free port (environment values rewritten to match), each replica gets its own
// /tmp, image services are replaced by harness servers, and depends_on conditions are honoured by running
// the dependency's own healthcheck command.
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePorts, startProcess, waitFor, type ActorProcess, type Teardown } from '../harness/index.js';
import { isObj, scalar, type ComposeFile } from './compose.js';

export interface LocalStackOptions {
  /** The file, interpolated with the variables of the (pretend) host. */
  compose: ComposeFile;
  /** The image's WORKDIR: the repository root, where the built entry points are. */
  cwd: string;
  teardown: Teardown;
  /** Image services (nats, redis) and the harness servers that stand in for them: container port → local port. */
  standIns: Record<string, Record<number, number>>;
  /** `--scale service=N`. */
  scale?: Record<string, number>;
  /** Each replica's /tmp is a folder under this one. */
  workDir: string;
  /** How long a dependency may take to pass its healthcheck; default 60 s. */
  healthTimeoutMs?: number;
}

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

const DEFAULT_HEALTHCHECK_TIMEOUT_MS = 30_000;

/** `5s`, `1m30s`, `250ms` as compose writes durations. */
function durationMs(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  const text = scalar(value);
  let total = 0;
  let matched = '';
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|us|s|m|h)/g)) {
    const n = Number(m[1]);
    total += m[2] === 'h' ? n * 3_600_000 : m[2] === 'm' ? n * 60_000 : m[2] === 's' ? n * 1_000 : m[2] === 'ms' ? n : n / 1_000;
    matched += m[0];
  }
  if (matched !== text) throw new Error(`"${text}" is not a compose duration (e.g. 5s, 1m30s)`);
  return total;
}

function exec(command: string, args: readonly string[], o: { cwd: string; env: Record<string, string>; timeoutMs: number }): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd: o.cwd, env: o.env, timeout: o.timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr: error && code !== 0 && stderr === '' ? error.message : stderr });
    });
  });
}

/** The key of a local port: replica 0's is `service:port` (what the service's hostname reaches; stand-ins use it too). */
function replicaPortKey(service: string, replica: number, containerPort: number): string {
  return replica === 0 ? `${service}:${containerPort}` : `${service}#${replica}:${containerPort}`;
}

export class LocalStack {
  private readonly ports = new Map<string, number>();
  private readonly replicas = new Map<string, ActorProcess[]>();
  private readonly exits = new Map<ActorProcess, number | null>();
  private readonly starting = new Map<string, Promise<void>>();

  private constructor(private readonly o: LocalStackOptions) {}

  /** Allocates a local port for every container port of every built service. */
  static async create(o: LocalStackOptions): Promise<LocalStack> {
    const stack = new LocalStack(o);
    for (const [name, ports] of Object.entries(o.standIns)) {
      for (const [container, local] of Object.entries(ports)) stack.ports.set(`${name}:${container}`, local);
    }
    // One local port per container port per replica (and one more for a `run` container): replicas of a
    // scaled service each listen on their own, as each container does on its own address.
    const wanted = o.compose
      .serviceNames()
      .filter((n) => !(n in o.standIns))
      .flatMap((n) => o.compose.containerPorts(n).flatMap((p) => Array.from({ length: (o.scale?.[n] ?? 1) + 1 }, (_x, i) => replicaPortKey(n, i, p))));
    const free = await freePorts(wanted.length);
    wanted.forEach((key, i) => stack.ports.set(key, free[i] as number));
    return stack;
  }

  /** The local port standing in for container port `containerPort` of `service`'s replica `replica`. */
  replicaPort(service: string, replica: number, containerPort: number): number {
    const port = this.ports.get(replicaPortKey(service, replica, containerPort));
    if (port === undefined) throw new Error(`\`${service}\` replica ${replica} does not listen on port ${containerPort} (no expose/ports entry, and no stand-in)`);
    return port;
  }

  /** The local port standing in for `service`'s container port (its first replica: what its hostname reaches). */
  hostPort(service: string, containerPort: number): number {
    const port = this.ports.get(`${service}:${containerPort}`);
    if (port === undefined) throw new Error(`\`${service}\` does not listen on port ${containerPort} (no expose/ports entry, and no stand-in)`);
    return port;
  }

  processes(service: string): ActorProcess[] {
    return this.replicas.get(service) ?? [];
  }

  private replicaTmp(service: string, replica: number): string {
    const dir = join(this.o.workDir, `${service}-${replica + 1}`, 'tmp');
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  /** Rewrites what only makes sense inside the container: `host:port` of a service, its own port numbers, /tmp. */
  private localise(service: string, replica: number, key: string, value: string): string {
    const names = this.o.compose.serviceNames();
    const own = this.o.compose.containerPorts(service).map(String);
    if (own.includes(value.trim())) return String(this.replicaPort(service, replica, Number(value.trim())));
    return value
      .replace(/\b([A-Za-z0-9][A-Za-z0-9_.-]*):(\d+)\b/g, (match, host: string, port: string) => {
        if (!names.includes(host)) return match;
        try {
          return `127.0.0.1:${this.hostPort(host, Number(port))}`;
        } catch (e) {
          throw new Error(`\`${service}\`: ${key}=${value} cannot reach anything: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
        }
      })
      .split('/tmp/')
      .join(`${this.replicaTmp(service, replica)}/`);
  }

  /** The environment the replica's container would have (compose `environment:`), localised. */
  env(service: string, replica = 0): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.o.compose.environment(service))) {
      if (v !== undefined) out[k] = this.localise(service, replica, k, v);
    }
    return out;
  }

  /** The command as a local process: `node` is this Node; everything else as written. */
  private local(argv: readonly string[]): { command: string; args: string[] } {
    const [first, ...rest] = argv;
    if (first === undefined) throw new Error('empty command');
    return { command: first === 'node' ? process.execPath : first, args: rest };
  }

  /** Runs `service`'s healthcheck in each replica's environment; true when every replica passes. */
  async healthy(service: string): Promise<boolean> {
    const test = this.o.compose.healthcheckTest(service);
    if (test === undefined) throw new Error(`\`${service}\` has no healthcheck: nothing can wait for it to be healthy`);
    const hc = this.o.compose.service(service)['healthcheck'];
    const timeoutMs = (isObj(hc) ? durationMs(hc['timeout']) : undefined) ?? DEFAULT_HEALTHCHECK_TIMEOUT_MS;
    const replicas = this.processes(service);
    if (replicas.length === 0) return false;
    const results = await Promise.all(
      replicas.map(async (_p, i) => {
        const words = test.slice(1).map((w) => this.localise(service, i, 'healthcheck', w));
        const { command, args } = test[0] === 'CMD-SHELL' ? { command: '/bin/sh', args: ['-c', words.join(' ')] } : this.local(words);
        const r = await exec(command, args, { cwd: this.o.cwd, env: { PATH: process.env['PATH'] ?? '', ...this.env(service, i) }, timeoutMs });
        return r.code === 0;
      }),
    );
    return results.every(Boolean);
  }

  private async waitHealthy(service: string, forWhom: string): Promise<void> {
    await waitFor(
      async () => {
        const dead = this.processes(service).find((p) => this.exits.has(p));
        if (dead) throw new Error(`${dead.name} exited (${String(this.exits.get(dead))}) before it was healthy:\n${dead.output().slice(-4_000)}`);
        return this.healthy(service);
      },
      {
        timeoutMs: this.o.healthTimeoutMs ?? 60_000,
        intervalMs: 250,
        what: `\`${service}\` to pass its healthcheck (\`${forWhom}\` depends on it with condition: service_healthy)`,
        lastSeen: () => this.processes(service).map((p) => `${p.name}: ${p.output().split('\n').slice(-5).join(' | ')}`).join('\n'),
      },
    );
    const dead = this.processes(service).find((p) => this.exits.has(p));
    if (dead) throw new Error(`${dead.name} exited (${String(this.exits.get(dead))}):\n${dead.output().slice(-4_000)}`);
  }

  /** Waits for `service`'s depends_on, as compose does before starting it. */
  private async dependencies(service: string): Promise<void> {
    await Promise.all(
      Object.entries(this.o.compose.dependsOn(service)).map(async ([dep, condition]) => {
        await this.start(dep);
        // A stand-in is a harness server, ready once it was started.
        if (dep in this.o.standIns) return;
        if (condition === 'service_healthy') await this.waitHealthy(dep, service);
        else if (condition !== 'service_started') throw new Error(`\`${service}\` -> \`${dep}\`: condition ${condition} is not supported here`);
      }),
    );
  }

  /** Starts a service's replicas after its dependencies (once; later calls wait for the same start). */
  start(service: string): Promise<void> {
    let started = this.starting.get(service);
    if (!started) {
      started = this.startOnce(service);
      this.starting.set(service, started);
    }
    return started;
  }

  private async startOnce(service: string): Promise<void> {
    if (service in this.o.standIns) return;
    if (this.o.compose.service(service)['build'] === undefined) {
      throw new Error(`\`${service}\` runs an image, and no local stand-in was given for it`);
    }
    await this.dependencies(service);
    const count = this.o.scale?.[service] ?? 1;
    const replicas = await Promise.all(
      Array.from({ length: count }, async (_x, i) => {
        const { command, args } = this.local(this.o.compose.argv(service));
        const p = await startProcess({ name: `${service}-${i + 1}`, command, args, env: this.env(service, i), cwd: this.o.cwd, teardown: this.o.teardown });
        void p.exited.then((code) => this.exits.set(p, code));
        return p;
      }),
    );
    this.replicas.set(service, replicas);
  }

  /** `docker compose up -d`: every service not limited to a profile. */
  async up(): Promise<void> {
    await Promise.all(
      this.o.compose
        .serviceNames()
        .filter((n) => this.o.compose.isDefaultProfile(n))
        .map((n) => this.start(n)),
    );
  }

  /** `docker compose run --rm <service> [args...]`: its dependencies first, then the command once, to the end. */
  async run(service: string, args?: readonly string[], timeoutMs = 120_000): Promise<CommandResult> {
    await this.dependencies(service);
    const { command, args: rest } = this.local(this.o.compose.argv(service, args));
    // A one-off container has its own /tmp too: replica index past the service's scale.
    return exec(command, rest, { cwd: this.o.cwd, env: { PATH: process.env['PATH'] ?? '', ...this.env(service, this.o.scale?.[service] ?? 1) }, timeoutMs });
  }
}
