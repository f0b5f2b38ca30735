/**
 * The README's "Each part runs alone too" path: the entry points of `npm run start:services`,
 * `start:agents` (twice), `start:scheduler` (twice) and `start:supervisor`, read from package.json and
 * run with one shared environment (as from one shell), then `npx triad submit orders ... --wait`.
 * Nothing but the agent hosts registers the `orders` workflow: they start before any scheduler, wait,
 * and leave exactly one version between them (and a later agent host adds none).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_ENDPOINTS } from '@triad/example-orders';
import { freePorts, startNats, startProcess, startRedis, uniqueNamespace, withTeardown, type ActorProcess, type NatsServer, type RedisServer } from '../harness/index.js';
import { ROOT, cli } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let env: Record<string, string>;

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };

/** The Node entry point an npm script runs after building (`npm run build:apps --silent && node <script>`). */
function entryPoint(script: string): string {
  const command = pkg.scripts[script];
  const m = command === undefined ? null : /(?:^|&&)\s*node\s+(\S+\.js)\s*$/.exec(command);
  if (!m?.[1]) throw new Error(`package.json script ${script} (${String(command)}) does not end in \`node <script>.js\`: update this test`);
  return m[1];
}

let started = 0;
function start(script: string, readyPattern?: RegExp): Promise<ActorProcess> {
  return startProcess({ name: `${script}-${++started}`, args: [entryPoint(script)], env, cwd: ROOT, ...(readyPattern ? { readyPattern } : {}), teardown: td });
}

/** `npx triad ...`: the repository's `triad` bin with the same environment. */
function triad(args: string[]): ReturnType<typeof cli> {
  const bin = pkg.bin['triad'];
  if (bin !== 'apps/cli/bin/triad.js') throw new Error(`package.json bin.triad is ${String(bin)}: update this test`);
  return cli({ env }, args);
}

const REGISTERED = /workflow orders v(\d+) (registered|already registered)/;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  const endpoints = Object.values(SERVICE_ENDPOINTS);
  const ports = await freePorts(endpoints.length);
  // Free ports instead of 7101..7104, through the *_PORT variables both start:services and start:agents read.
  env = {
    NATS_URL: nats.url,
    REDIS_URL: redis.url,
    TRIAD_NAMESPACE: uniqueNamespace('start'),
    TRIAD_LOG_LEVEL: 'info',
    ...Object.fromEntries(endpoints.map((e, i) => [e.portVariable, String(ports[i])])),
  };
});

describe('the start:* scripts, one process per actor', () => {
  it('take an order with nothing else registering the workflow', async () => {
    const services = await start('start:services');
    for (const [name, e] of Object.entries(SERVICE_ENDPOINTS)) await services.waitForOutput(new RegExp(`${name} listening on http://127.0.0.1:${env[e.portVariable]} `));

    // The agents come up before any scheduler: they serve, and keep trying to register.
    const agents = await Promise.all([start('start:agents', /order-agents ready/), start('start:agents', /order-agents ready/)]);
    for (const a of agents) await a.waitForOutput(/workflow orders not registered yet .*retrying in the background/);

    await Promise.all([start('start:scheduler', /scheduler ready/), start('start:scheduler', /scheduler ready/), start('start:supervisor', /supervisor ready/)]);
    const outcomes = await Promise.all(agents.map((a) => a.waitForOutput(REGISTERED, 30_000)));
    const parsed = outcomes.map((line) => REGISTERED.exec(line));
    expect(parsed.map((m) => m?.[1]), 'both agent hosts end with version 1').toEqual(['1', '1']);
    // Both asked at once; the registerWorkflow script stores one version, so at most one of them created it.
    expect(parsed.filter((m) => m?.[2] === 'registered').length, 'at most one agent host created the version').toBeLessThanOrEqual(1);
    const list = await triad(['workflows', '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as { name: string; versions: number[] }[]).find((w) => w.name === 'orders')?.versions).toEqual([1]);

    const r = await triad(['submit', 'orders', '--input', '{"orderId":"o1","amount":42}', '--wait', '--json']);
    expect(r.code, `triad submit --wait exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(0);
    const state = JSON.parse(r.stdout) as { status: string; steps: { name: string; status: string }[] };
    expect(state.status).toBe('completed');
    expect(state.steps.map((s) => s.name).sort()).toEqual(['approval', 'charge', 'fraud', 'reserve', 'ship']);
  }, 180_000);

  it('a restarted agent host registers no new version, and orders.workflow.json is that same version', async () => {
    const third = await start('start:agents', /order-agents ready/);
    expect(await third.waitForOutput(REGISTERED, 30_000)).toMatch(/workflow orders v1 already registered/);
    const fromFile = await triad(['workflows', 'register', 'apps/example-orders/orders.workflow.json']);
    expect(fromFile.code, fromFile.stderr).toBe(0);
    expect(fromFile.stdout.trim()).toBe('orders v1 already registered');
    const list = await triad(['workflows', '--json']);
    expect(list.code, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as { name: string; versions: number[] }[]).find((w) => w.name === 'orders')?.versions).toEqual([1]);
  }, 120_000);
});
