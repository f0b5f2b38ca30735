// The README's first commands, as a new user runs them on a machine where nothing listens yet: in a fresh
// copy of the repository, `npm ci && npm start` with only NATS_URL and REDIS_URL set (free ports here,
// where 4222/6379 are taken by the machine's own servers), then in another shell — a new environment,
// with only what npm start told the user to type — `npx triad submit … --wait --json`, `list`, `watch`,
// `status`, `cancel` and `npx triad dashboard`. No TRIAD_DATA_DIR, no test-only variable: the CLI must
// find npm start's operator credentials by itself (issue #21, decision 0016).
import { readFile, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts, listening, startProcess, waitFor, withTeardown, type ActorProcess } from '../harness/index.js';
import { ROOT, SCRIPTS } from '../support/triad.js';
import { freshCheckout, shell, userShell, type ShellResult } from '../support/user-machine.js';

const td = withTeardown(afterAll);
let repo: string;
let natsPort: number;
let redisPort: number;
let npmStart: ActorProcess;
/** What npm start printed under "In another shell, from this repository:". */
let nextSteps: string[];
/** The environment of the user's second shell: a new one, with only what npm start told them to export. */
let secondShell: Record<string, string>;
let exportLine: string;

/** A command typed in the second shell, after the export line npm start printed (if any). */
const typed = (line: string, timeoutMs?: number): Promise<ShellResult> => shell(repo, secondShell, exportLine ? `${exportLine}; ${line}` : line, timeoutMs);

function processGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Holds `port` (if it is free) so npm start finds the service's default port taken. */
function hold(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(undefined));
    s.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(s));
  });
}

beforeAll(async () => {
  repo = freshCheckout(td, 'readme');
  const install = await shell(repo, userShell(), 'npm ci --no-audit --no-fund', 600_000);
  if (install.code !== 0) throw new Error(`npm ci failed in the fresh checkout (exit ${install.code}):\n${install.stderr.slice(-4000)}`);
  [natsPort, redisPort] = (await freePorts(2)) as [number, number];
  // The payment service's default port taken (by us, or by anyone already): npm start must pick another.
  const held = await hold(7102);
  if (held) td.add(() => new Promise<void>((r) => held.close(() => r())));
  npmStart = await startProcess({
    name: 'npm-start',
    command: 'npm',
    args: ['start'],
    cwd: repo,
    // A user's knobs only: where NATS and Redis are to be.
    env: userShell({ NATS_URL: `nats://127.0.0.1:${natsPort}`, REDIS_URL: `redis://127.0.0.1:${redisPort}` }),
    inheritEnv: false,
    group: true,
    readyPattern: /Triad is running/,
    readyTimeoutMs: 400_000,
    teardown: td,
  });
  // The lines after "Triad is running" may still be on their way: wait for the last of them.
  await npmStart.waitForOutput(/^ {2}npx triad dashboard$/, 10_000);
  const out = npmStart.output().split('\n');
  const at = out.findIndex((l) => l.startsWith('In another shell, from this repository:'));
  nextSteps = at < 0 ? [] : out.slice(at + 1).filter((l, i, all) => l.startsWith('  ') && all.slice(0, i).every((p) => p.startsWith('  '))).map((l) => l.trim());
  exportLine = nextSteps.find((l) => l.startsWith('export ')) ?? '';
  secondShell = userShell();
}, 600_000);

describe('a new user follows the README', () => {
  it('npm start starts its own NATS and Redis, secured, and says what to type next', () => {
    const out = npmStart.output();
    expect(out).toMatch(/NATS {3}nats:\/\/127\.0\.0\.1:\d+ \(started here, secured: one nkey user per actor/);
    expect(out).toMatch(/Redis {2}redis:\/\/127\.0\.0\.1:\d+ \(started here, secured: ACL users for the scheduler and supervisor/);
    expect(out).toContain(`npx triad run from ${repo} uses the operator identity in ${join(repo, '.triad', 'auth', 'operator.env')} by itself`);
    expect(nextSteps).toContain(`export NATS_URL=nats://127.0.0.1:${natsPort}`);
    expect(nextSteps).toContain(`npx triad submit orders --input '{"orderId":"o1","amount":42}' --wait --json`);
  });

  it('picks a free port for a service whose default port is taken, and prints it', () => {
    const line = npmStart.output().split('\n').find((l) => l.startsWith('services  ')) ?? '';
    expect(line).toMatch(/payment :(\d+) \(7102 was taken\)/);
    expect(line).toMatch(/inventory :\d+/);
  });

  it('writes the credentials 0600 under .triad/auth, and Redis has no default user', async () => {
    expect((await stat(join(repo, '.triad', 'auth', 'operator.nk'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(repo, '.triad', 'auth', 'operator.env'))).mode & 0o777).toBe(0o600);
    expect(await readFile(join(repo, '.triad', 'auth', 'redis-users.acl'), 'utf8')).toMatch(/^user default off\n/);
  });

  it('the README\'s next command prints a completed task: npx triad submit orders … --wait --json', async () => {
    const r = await typed(`npx triad submit orders --input '{"orderId":"o1","amount":42}' --wait --json`);
    expect(r.code, r.stderr).toBe(0);
    const task = JSON.parse(r.stdout) as { taskId: string; status: string; steps: { name: string; status: string }[] };
    expect(task.status).toBe('completed');
    expect(task.steps.map((s) => s.name).sort()).toEqual(['approval', 'charge', 'fraud', 'reserve', 'ship']);
  }, 180_000);

  it('submit prints the id; watch follows it to the end; status and list show it', async () => {
    const submitted = await typed(`npx triad submit orders --input '{"orderId":"o2","amount":7}'`);
    expect(submitted.code, submitted.stderr).toBe(0);
    const taskId = submitted.stdout.trim();
    expect(taskId).toMatch(/^[0-9a-f-]{36}$/);
    const watched = await typed(`npx triad watch ${taskId}`);
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toMatch(/completed/);
    const status = await typed(`npx triad status ${taskId} --json`);
    expect(status.code, status.stderr).toBe(0);
    expect((JSON.parse(status.stdout) as { status: string }).status).toBe('completed');
    const list = await typed('npx triad list');
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(taskId);
  }, 180_000);

  it('npm start\'s demo sends one large order and approves it after a few seconds: it completes', async () => {
    await npmStart.waitForOutput(/signal approved sent \(delivered\)/, 120_000);
    const out = npmStart.output();
    const id = /^(\S{12})\s+demo-\d+ is a large order \(amount 1500\)/m.exec(out)?.[1];
    expect(id, out).toBeDefined();
    await npmStart.waitForOutput(new RegExp(`${id ?? '-'}\\s+completed`), 60_000);
    expect(npmStart.output()).toMatch(new RegExp(`${id ?? '-'}\\s+step_waiting approval`));
  }, 200_000);

  it('a large order waits for approval; npx triad signal <taskId> approved lets it finish', async () => {
    const submitted = await typed(`npx triad submit orders --input '{"orderId":"o3","amount":1500}'`);
    expect(submitted.code, submitted.stderr).toBe(0);
    const taskId = submitted.stdout.trim();
    const signalled = await typed(`npx triad signal ${taskId} approved --data '{"approvedBy":"me"}'`);
    expect(signalled.code, signalled.stderr).toBe(0);
    const watched = await typed(`npx triad watch ${taskId}`);
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toMatch(/completed/);
    const status = await typed(`npx triad status ${taskId} --json`);
    const task = JSON.parse(status.stdout) as { status: string; steps: { name: string; status: string; output?: unknown }[] };
    expect(task.status).toBe('completed');
    expect(task.steps.find((s) => s.name === 'approval')).toMatchObject({ status: 'processed', output: { approvedBy: 'me' } });
  }, 180_000);

  it('an order with two lines ships each: ship fans out over the reservation\'s lines, one shipping call per line', async () => {
    const r = await typed(`npx triad submit orders --input '{"orderId":"o5","amount":42,"items":[{"sku":"A1","qty":2},{"sku":"B7","qty":1}]}' --wait --json`);
    expect(r.code, r.stderr).toBe(0);
    const task = JSON.parse(r.stdout) as { status: string; steps: { name: string; status: string; output?: unknown; items?: { count: number; done: number } }[] };
    expect(task.status).toBe('completed');
    const ship = task.steps.find((s) => s.name === 'ship');
    expect(ship).toMatchObject({ status: 'processed', items: { count: 2, done: 2 } });
    const shipped = ship?.output as { trackingNumber?: unknown }[];
    expect(shipped).toHaveLength(2);
    expect(new Set(shipped.map((o) => o.trackingNumber)).size, 'two shipments, two tracking numbers').toBe(2);
  }, 180_000);

  it('cancel stops an order whose charge is in flight, and undoes it: the charge waited for, then refunded', async () => {
    // The test watches with the checkout's CLI directly (faster than npx); the user's actions go through npx.
    const observe = async (taskId: string): Promise<{ status: string; steps: { name: string; status: string }[] } | undefined> => {
      const s = await shell(repo, secondShell, `${exportLine ? `${exportLine}; ` : ''}node apps/cli/bin/triad.js status ${taskId} --json`);
      return s.code === 0 ? (JSON.parse(s.stdout) as { status: string; steps: { name: string; status: string }[] }) : undefined;
    };
    // The payment service's fault knob (protocol.md §11), on the port npm start printed: every charge hangs,
    // so it is certainly in flight when the cancel arrives however long npx takes to start.
    const payment = /payment :(\d+)/.exec(npmStart.output())?.[1];
    expect(payment).toBeDefined();
    const faults = async (body: object): Promise<void> => {
      const r = await fetch(`http://127.0.0.1:${payment ?? ''}/faults`, { method: 'PUT', body: JSON.stringify(body) });
      expect(r.status).toBe(200);
    };
    await faults({ hangRate: 1 });
    try {
      const submitted = await typed(`npx triad submit orders --input '{"orderId":"o3","amount":9}'`);
      expect(submitted.code, submitted.stderr).toBe(0);
      const taskId = submitted.stdout.trim();
      await waitFor(async () => (await observe(taskId))?.steps.some((st) => st.name === 'charge' && st.status === 'processing'), {
        timeoutMs: 60_000,
        intervalMs: 250,
        what: `the charge of ${taskId} to be in flight`,
      });
      const cancelled = await typed(`npx triad cancel ${taskId}`);
      expect(cancelled.code, cancelled.stderr).toBe(0);
      expect(cancelled.stdout).toContain(`${taskId} is`);
      await faults({ hangRate: 0 });
      // The undo waits for the charge in flight (it hangs until its complete-by), then refunds whatever
      // it may have done and releases the reservation.
      const ended = await waitFor(
        async () => {
          const t = await observe(taskId);
          return t?.status === 'cancelled' ? t : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500, what: `${taskId} to end cancelled` },
      );
      expect(ended.steps.find((st) => st.name === 'charge')?.status).toBe('compensated');
      expect(ended.steps.find((st) => st.name === 'reserve')?.status).toBe('compensated');
    } finally {
      await faults({ hangRate: 0 });
    }
  }, 180_000);

  it('npx triad dashboard serves the tasks with the operator identity', async () => {
    const [port] = (await freePorts(1)) as [number];
    const dashboard = await startProcess({
      name: 'dashboard',
      command: '/bin/sh',
      args: ['-c', `${exportLine ? `${exportLine}; ` : ''}exec npx triad dashboard --port ${port}`],
      cwd: repo,
      env: secondShell,
      inheritEnv: false,
      group: true,
      readyPattern: /dashboard at http/,
      readyTimeoutMs: 60_000,
      teardown: td,
    });
    expect(dashboard.output()).toMatch(/identity operator; operator: actions enabled/);
    const me = (await (await fetch(`http://127.0.0.1:${port}/api/identity`)).json()) as { canAct: boolean };
    expect(me.canAct).toBe(true);
    const page = await fetch(`http://127.0.0.1:${port}/`);
    expect(page.status).toBe(200);
    // Ctrl-C: npx and the dashboard go, and its port with them.
    dashboard.signal('SIGINT');
    await dashboard.exited;
    await waitFor(async () => !(await listening('127.0.0.1', port)), { timeoutMs: 15_000, what: `the dashboard's port ${port} to be free after Ctrl-C` });
  }, 180_000);

  it('a CLI that is not this repository\'s gets a clear refusal, not the local operator identity', async () => {
    // The repository under test's own CLI (another checkout): no operator.env for this NATS_URL there.
    const r = await shell(ROOT, userShell({ NATS_URL: `nats://127.0.0.1:${natsPort}` }), `node ${SCRIPTS.cli} list`);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/requires credentials and none were given/);
  });

  // Last: it stops npm start.
  it('Ctrl-C stops npm start and every server and actor it started', async () => {
    npmStart.signal('SIGINT');
    await npmStart.exited;
    // Every process of its group (npm, npm start's runner, the servers, the actors) ends.
    await waitFor(() => !processGroupAlive(npmStart.pid), { timeoutMs: 20_000, what: `npm start's process group ${npmStart.pid} to end after Ctrl-C` });
    for (const port of [natsPort, redisPort]) expect(await listening('127.0.0.1', port)).toBe(false);
    expect(npmStart.output()).not.toMatch(/exited \(|Stopping\./);
  });
});
