/**
 * `npm run test:containers` (and part of `npm test`): the README's "Containers" commands, read from the
 * README and run word for word in a Docker engine, for each of the three Compose files, in a fresh
 * built copy of the repository, with only what a user sets (COMPOSE_PROJECT_NAME, COMPOSE_FILE).
 *
 * Docker is installed and started when missing (test/support/docker.ts); base images that cannot be
 * pulled are stood in for by scripts/containers/base-images.mjs. For each file: build, up with agents
 * scaled to 3 and schedulers to 2, 20 orders through the `cli` service while the block's `docker kill`
 * line kills an agent and a scheduler (and on the cluster nats-1 and the Redis primary redis-1) once
 * orders are under way; every `submit --wait` must exit 0 (the task completed), every order must have
 * exactly one applied, never undone effect on each of the four example services (their ledgers, GET
 * /effects, docs/protocol.md §11), the killed containers must still be down afterwards (Docker does
 * not restart what `docker kill` stopped), and the second `up` must bring every replica back. Then
 * `down -v`.
 * Figures (image build, up, orders, retried steps, duplicate calls absorbed) are printed per stack.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Teardown, waitFor } from '../harness/index.js';
import { ensureDocker, run, type DockerEngine } from '../support/docker.js';
import { ROOT } from '../support/triad.js';
import { builtCheckout, shell, userShell } from '../support/user-machine.js';

const FILES = ['docker-compose.yml', 'docker-compose.secured.yml', 'docker-compose.cluster.yml'] as const;
type ComposeFileName = (typeof FILES)[number];
const ORDERS = 20;
/** The kill comes once this many orders were submitted (and before the last one was). */
const KILL_AFTER_SUBMITTED = 4;
const SERVICES = ['inventory', 'fraud', 'payment', 'shipping'] as const;

interface Block {
  /** Every command of the block, in order, as the README shows it. */
  lines: string[];
  /** Index of the orders line (`seq 1 20 | xargs … submit … --wait`) and of the `docker kill` line after it. */
  orders: number;
  kill: number;
  /** The `docker-compose start …` lines right after the kill: also run while the orders go on. */
  starts: number[];
}

/** The README's block for `file`: the ```sh block after `<!-- test:containers <file> -->`. */
function readmeBlock(file: ComposeFileName): Block {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const marker = `<!-- test:containers ${file} -->`;
  const at = readme.indexOf(marker);
  if (at < 0) throw new Error(`README.md has no "${marker}" before the commands for ${file}`);
  const m = /^```sh\n([\s\S]*?)^```$/m.exec(readme.slice(at + marker.length));
  if (!m?.[1]) throw new Error(`README.md: no \`\`\`sh block after "${marker}"`);
  const lines = m[1]
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const orders = lines.findIndex((l) => /\bxargs\b/.test(l) && /\bsubmit orders\b/.test(l) && /--wait\b/.test(l));
  if (orders < 0) throw new Error(`README.md, ${file}: no orders line (seq 1 ${ORDERS} | xargs … submit orders … --wait)`);
  const kill = orders + 1;
  if (!/^docker kill /.test(lines[kill] ?? '')) throw new Error(`README.md, ${file}: the line after the orders must be the \`docker kill\` run while they go on, not "${lines[kill] ?? ''}"`);
  const starts: number[] = [];
  for (let i = kill + 1; /^docker-compose start /.test(lines[i] ?? ''); i++) starts.push(i);
  return { lines, orders, kill, starts };
}

/** A project name of this working tree's own, stable from run to run (its images stay tagged, the build cache used). */
function projectName(file: ComposeFileName): string {
  const tree = createHash('sha256').update(ROOT).digest('hex').slice(0, 6);
  const kind = file === 'docker-compose.yml' ? 'plain' : file.replace(/^docker-compose\.|\.yml$/g, '');
  return `triadtest${tree}-${kind}`;
}

interface Effect {
  idempotencyKey: string;
  payload?: { orderId?: string } | null;
  applied: boolean;
  calls: number;
  undone: boolean;
  reversals: number;
}

/** Every service's ledger, read inside the `services` container (it publishes no port). */
const LEDGERS_SCRIPT = [
  "const ports = { inventory: 'INVENTORY_PORT', fraud: 'FRAUD_PORT', payment: 'PAYMENT_PORT', shipping: 'SHIPPING_PORT' };",
  'Promise.all(Object.entries(ports).map(([name, key]) => fetch("http://127.0.0.1:" + process.env[key] + "/effects").then((r) => r.json()).then((b) => [name, b.effects])))',
  '.then((all) => console.log(JSON.stringify(Object.fromEntries(all))), (e) => { console.error(String(e)); process.exit(1); });',
].join(' ');

interface Running {
  code: Promise<number>;
  stdout: () => string;
  stderr: () => string;
  done: () => boolean;
  /** Ends the command and everything it started (its process group), and waits for it. */
  stop: () => Promise<void>;
}

/** Starts a command line in a shell of its own process group and keeps its output as it comes. */
function background(cwd: string, env: Record<string, string>, line: string): Running {
  const child = spawn('/bin/sh', ['-c', line], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  let err = '';
  let finished = false;
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = new Promise<number>((resolve) => {
    child.on('close', (c, signal) => {
      finished = true;
      resolve(c ?? (signal ? 128 : 1));
    });
    child.on('error', (e) => {
      err += String(e);
      finished = true;
      resolve(127);
    });
  });
  const stop = async (): Promise<void> => {
    if (finished || child.pid === undefined) return;
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      if (!finished && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, 10_000);
    await code;
    clearTimeout(timer);
  };
  return { code, stdout: () => out, stderr: () => err, done: () => finished, stop };
}

const td = new Teardown();
let engine: DockerEngine;
let checkout: string;
let baseImages: unknown;

beforeAll(async () => {
  engine = await ensureDocker(td);
  const images = await run(process.execPath, [join(ROOT, 'scripts/containers/base-images.mjs')], { cwd: ROOT, timeoutMs: 20 * 60_000 });
  if (images.code !== 0) throw new Error(`scripts/containers/base-images.mjs failed (exit ${images.code}):\n${images.output.slice(-4_000)}`);
  baseImages = JSON.parse(images.stdout.trim().split('\n').pop() ?? '{}');
  checkout = builtCheckout(td, 'containers');
  console.log(`containers: engine ${engine.version}${engine.installed ? ' (installed by this test)' : ''}${engine.started ? ' (dockerd started by this test)' : ''}; base images ${JSON.stringify(baseImages)}`);
}, 40 * 60_000);

afterAll(async () => {
  await td.run();
}, 5 * 60_000);

describe("the README's container commands, in Docker", () => {
  it.each(FILES)('%s: 20 orders complete through the kills, every effect applied once; the killed replicas come back', async (file) => {
    const block = readmeBlock(file);
    const project = projectName(file);
    const env = userShell({ COMPOSE_PROJECT_NAME: project, COMPOSE_FILE: file });
    const compose = (args: string, timeoutMs = 120_000): ReturnType<typeof shell> => shell(checkout, env, `docker-compose ${args}`, timeoutMs);
    const figures: Record<string, unknown> = { file, project };
    // Whatever happens, nothing of this stack stays behind (the block's own `down -v` normally does it).
    const stackTd = new Teardown();
    stackTd.add(async () => {
      await compose('down -v --remove-orphans --timeout 5', 300_000);
    });
    if (file === 'docker-compose.secured.yml' && existsSync(join(checkout, 'deploy/auth'))) throw new Error(`${checkout}/deploy/auth exists before the block ran`);
    try {
      const step = async (line: string): Promise<void> => {
        const started = Date.now();
        const r = await shell(checkout, env, line, 20 * 60_000);
        const seconds = Math.round((Date.now() - started) / 100) / 10;
        if (r.code !== 0) throw new Error(`README (${file}): \`${line}\` exited ${r.code}${r.signal ? ` (${r.signal})` : ''}:\n${`${r.stdout}\n${r.stderr}`.trim().slice(-6_000)}`);
        if (/^docker-compose build\b/.test(line)) figures['build_s'] = seconds;
        const scale = [...line.matchAll(/--scale ([\w-]+)=(\d+)/g)].map((m) => [m[1] ?? '', Number(m[2])] as const);
        if (/^docker-compose up\b/.test(line)) {
          figures[figures['up_s'] === undefined ? 'up_s' : 'up_again_s'] = seconds;
          // Every replica asked for runs: after the second `up`, the killed ones are back.
          for (const [service, n] of scale) {
            const ids = (await compose(`ps -q ${service}`)).stdout.split('\n').filter((l) => l.trim() !== '');
            const running = await Promise.all(ids.map(async (id) => (await run('docker', ['inspect', '-f', '{{.State.Running}}', id])).output.trim() === 'true'));
            expect(running.filter(Boolean).length, `${file}: running replicas of ${service} after \`${line}\``).toBe(n);
          }
        }
      };

      for (const line of block.lines.slice(0, block.orders)) await step(line);

      const orderCount = Number(/\bseq 1 (\d+)\b/.exec(block.lines[block.orders] ?? '')?.[1]);
      expect(orderCount, 'the README runs 20 orders').toBe(ORDERS);
      const killLine = block.lines[block.kill] ?? '';
      if (/redis-1/.test(killLine)) {
        // The Redis node killed must be a primary.
        const role = await compose('exec -T redis-1 redis-cli role');
        expect(role.stdout.trim().split('\n')[0], `${file}: redis-1 is a primary before it is killed`).toBe('master');
      }

      // The orders, and the kill once they are under way (another shell's, in the README's words).
      const started = Date.now();
      const orders = background(checkout, env, block.lines[block.orders] ?? '');
      // Before the down: a `run` still going would start the stack's services again.
      stackTd.add(() => orders.stop());
      const submitted = (): number => (orders.stderr().match(/^submitted \S+/gm) ?? []).length;
      await waitFor(() => orders.done() || submitted() >= KILL_AFTER_SUBMITTED, { timeoutMs: 10 * 60_000, intervalMs: 200, what: `${KILL_AFTER_SUBMITTED} orders submitted`, lastSeen: () => orders.stderr().slice(-2_000) });
      expect(orders.done(), `${file}: the orders finished before the kill:\n${orders.stderr().slice(-3_000)}`).toBe(false);
      const submittedAtKill = submitted();
      const kill = await shell(checkout, env, killLine, 120_000);
      const killedIds = kill.stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '');
      const killedServices = [...killLine.matchAll(/ps -q ([\w-]+)/g)].map((m) => m[1] ?? '');
      figures['killed'] = killedServices;
      expect({ code: kill.code, killed: killedIds.length }, `\`${killLine}\` killed ${killedIds.join(', ')}:\n${kill.stdout}${kill.stderr}`).toEqual({ code: 0, killed: killedServices.length });
      // What the README starts again while the orders run: a Redis node once its replica has taken over.
      const restarted: string[] = [];
      for (const i of block.starts) {
        const line = block.lines[i] ?? '';
        for (const service of line.replace(/^docker-compose start /, '').split(/\s+/)) {
          if (/^redis-\d+$/.test(service)) {
            const peer = service === 'redis-2' ? 'redis-3' : 'redis-2';
            await waitFor(
              async () => {
                const nodes = (await compose(`exec -T ${peer} redis-cli cluster nodes`)).stdout;
                const mine = nodes.split('\n').find((l) => l.includes(`,${service} `)) ?? '';
                return /,fail\b(?!\?)/.test(mine) && !/\d+-\d+\s*$/.test(mine.trim());
              },
              { timeoutMs: 120_000, intervalMs: 500, what: `${service}'s replica to take over its slots` },
            );
          }
          restarted.push(...(await compose(`ps -q ${service}`)).stdout.split('\n').map((l) => l.trim()).filter((l) => l !== ''));
        }
        const r = await shell(checkout, env, line, 120_000);
        expect(r.code, `\`${line}\`: ${r.stdout}${r.stderr}`).toBe(0);
      }

      const code = await Promise.race([orders.code, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 15 * 60_000).unref())]);
      figures['orders_s'] = Math.round((Date.now() - started) / 100) / 10;
      figures['submitted_before_kill'] = submittedAtKill;
      const output = `${orders.stdout()}\n${orders.stderr()}`;
      expect(code, `${file}: the orders line exited ${code} (0 only when every submit --wait saw its task complete):\n${output.slice(-8_000)}`).toBe(0);
      expect(submittedAtKill, `${file}: the kill came while orders were still to be submitted`).toBeLessThan(ORDERS);
      const completed = orders.stdout().match(/^task \S+ completed \(/gm) ?? [];
      expect(completed.length, `${file}: tasks reported completed`).toBe(ORDERS);
      // Steps that needed more than one attempt (the killed agent's or scheduler's, retried by the supervisor).
      figures['steps_retried'] = [...orders.stdout().matchAll(/^(?:reserve|fraud|charge|ship)\s+\S+\s+processed\s+(\d+)\s/gm)].filter((m) => Number(m[1]) > 1).length;
      figures['followers_missing_events'] = (orders.stderr().match(/did not reach this follower/g) ?? []).length;

      // The ledgers: each order applied exactly once on each service, nothing undone.
      const ledgers = await compose(`exec -T services node -e ${JSON.stringify(LEDGERS_SCRIPT).replace(/\$/g, '\\$')}`);
      expect(ledgers.code, `reading the ledgers: ${ledgers.stderr}`).toBe(0);
      const effects = JSON.parse(ledgers.stdout.trim().split('\n').pop() ?? '{}') as Record<string, Effect[]>;
      const wanted = Array.from({ length: ORDERS }, (_x, i) => `o${i + 1}`).sort();
      let duplicateCalls = 0;
      for (const service of SERVICES) {
        const applied = (effects[service] ?? []).filter((e) => e.applied);
        expect(applied.map((e) => e.payload?.orderId ?? '?').sort(), `${file}: ${service} applied each order once`).toEqual(wanted);
        expect(applied.filter((e) => e.undone || e.reversals > 0).map((e) => e.idempotencyKey), `${file}: ${service} undid nothing`).toEqual([]);
        duplicateCalls += applied.reduce((n, e) => n + e.calls - 1, 0);
      }
      figures['duplicate_calls_absorbed'] = duplicateCalls;

      // Docker counts `docker kill` as an operator's stop: the killed containers stay down (the orders
      // ran with --no-deps, which starts nothing) until the block's second `up`.
      for (const id of killedIds.filter((k) => !restarted.some((r) => r.startsWith(k) || k.startsWith(r)))) {
        const state = await run('docker', ['inspect', '-f', '{{.State.Running}} {{.State.ExitCode}}', id]);
        expect(state.stdout.trim(), `${file}: killed container ${id} after the orders`).toBe('false 137');
      }

      if (file === 'docker-compose.yml') {
        // The image runs `triad …` commands as they are: `docker run --rm <image> triad submit …`, here in the stack's network.
        const services = (await compose('ps -q services')).stdout.trim().split('\n')[0] ?? '';
        const image = (await run('docker', ['inspect', '-f', '{{.Image}}', services])).stdout.trim();
        const args = ['run', '--rm', '--network', `${project}_default`, '-e', 'NATS_URL=nats://nats:4222', image, 'triad', 'submit', 'orders', '--input', '{"orderId":"docker-run","amount":1}', '--wait', '--json'];
        const direct = await run('docker', args, { timeoutMs: 180_000 });
        expect(direct.code, `docker ${args.join(' ')}:\n${direct.output}`).toBe(0);
        expect((JSON.parse(direct.stdout) as { status?: string }).status).toBe('completed');
      }

      for (const line of block.lines.slice(block.kill + 1 + block.starts.length)) await step(line);
      console.log(`containers: ${JSON.stringify(figures)}`);
      if (file === 'docker-compose.secured.yml') expect(existsSync(join(checkout, 'deploy/auth')), 'the block removes deploy/auth').toBe(false);
    } finally {
      await stackTd.run();
    }
  }, 30 * 60_000);
});
