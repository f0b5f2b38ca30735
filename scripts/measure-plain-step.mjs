#!/usr/bin/env node
// What a plain 3-step task's transitions cost Redis (issue #23's "no more than before", docs/performance.md
// "A plain task's cost"): the bench's workflow shape driven through TaskStore on a private redis-server —
// createTask, then applyResult for each step, 8 tasks in flight — with no NATS and no other process.
//   node scripts/measure-plain-step.mjs [--repo <dir>] [--tasks 500] [--rounds 8] [--callgrind 100]
// --repo: a built checkout (default: this one), so two versions are measured by the same script.
// Figures per step: Redis' own time in EVALSHA (INFO commandstats, min and median over the rounds:
// wall time inside Redis, so a loaded machine inflates it) and redis-server's CPU. --callgrind N runs N
// tasks one at a time with redis-server under valgrind's callgrind, counting the instructions executed
// inside EVALSHA only (script loading excluded): the same on any machine, whatever its load.
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: { repo: { type: 'string', default: fileURLToPath(new URL('..', import.meta.url)) }, tasks: { type: 'string', default: '500' }, rounds: { type: 'string', default: '8' }, callgrind: { type: 'string' } },
});
const dir = resolve(o.repo);
const store = await import(join(dir, 'packages/store/dist/index.js'));
const core = await import(join(dir, 'packages/core/dist/index.js'));
const protocol = await import(join(dir, 'packages/protocol/dist/index.js'));

const HELD = { key: 'measure:lease:held', token: 'held-token', ms: 600_000 };
const T0 = 1_700_000_000_000;
const plan = core.compilePlan(
  core.validateDefinition({
    name: 'plain',
    steps: [
      { name: 'reserve', agent: 'inventory', compensate: { agent: 'inventory' } },
      { name: 'charge', agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'] },
      { name: 'ship', agent: 'shipping', dependsOn: ['charge'], needs: ['charge'] },
    ],
  }),
);
const input = protocol.encode({ orderId: 'o1', amount: 42, items: [{ sku: 'a', qty: 1 }] });

const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); }); });
const listening = async (port) => {
  for (let i = 0; i < 300; i++) {
    const up = await new Promise((res) => { const c = connect(port, '127.0.0.1', () => { c.end(); res(true); }); c.on('error', () => res(false)); });
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`redis-server did not listen on ${port}`);
};

async function withServer(prefix, fn) {
  const port = await freePort();
  const srv = spawn(prefix[0] ?? 'redis-server', [...prefix.slice(1), ...(prefix.length ? ['redis-server'] : []), '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  try {
    await listening(port);
    const redis = await store.connectRedis(`redis://127.0.0.1:${port}`, { connectionName: 'measure-plain-step' });
    await redis.set(HELD.key, HELD.token);
    try {
      return await fn(redis, srv.pid);
    } finally {
      await redis.quit();
    }
  } finally {
    srv.kill('SIGTERM');
    await new Promise((r) => srv.once('exit', r));
  }
}

let seq = 0;
async function runTask(tasks) {
  const taskId = `t${seq++}`;
  const created = await tasks.createTask({ lease: HELD, taskId, workflow: 'plain', version: 1, input, plan, onFailure: 'compensate', client: 'c1', now: T0, schedulerId: 's1' });
  if (!created.created) throw new Error(`task ${taskId} not created`);
  let now = T0;
  for (const [step, agentType] of [['reserve', 'inventory'], ['charge', 'payment'], ['ship', 'shipping']]) {
    now += 10;
    const r = await tasks.applyResult({ lease: HELD, taskId, step, kind: 'run', attempt: 1, now, schedulerId: 's1', agentId: 'a1', agentType, outcome: { ok: true, output: protocol.encode({ done: step }) } });
    if (!r.applied) throw new Error(`result of ${taskId}/${step} not applied: ${r.reason}`);
  }
}

const N = Number(o.tasks);
const ROUNDS = Number(o.rounds);
const cpuMs = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) * 10; };
const rounds = await withServer([], async (redis, pid) => {
  const tasks = new store.TaskStore(redis, 'measure');
  for (let i = 0; i < 200; i++) await runTask(tasks);
  const out = [];
  for (let r = 0; r < ROUNDS; r++) {
    await redis.config('RESETSTAT');
    const c0 = cpuMs(pid);
    let left = N;
    await Promise.all(Array.from({ length: 8 }, async () => { while (left-- > 0) await runTask(tasks); }));
    const cpu = (cpuMs(pid) - c0) / (N * 3);
    const m = /^cmdstat_evalsha:calls=(\d+),usec=(\d+)/m.exec(await redis.info('commandstats'));
    out.push({ usec: Number(m?.[2] ?? 0) / (N * 3), cpu });
  }
  return out;
});
const sorted = (k) => rounds.map((x) => x[k]).sort((a, b) => a - b);
const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
console.log(`${dir}: ${N} tasks × ${ROUNDS} rounds, load ${load}`);
console.log(`  EVALSHA µs per step (commandstats): min ${sorted('usec')[0].toFixed(1)}, median ${sorted('usec')[Math.floor(ROUNDS / 2)].toFixed(1)}`);
console.log(`  redis-server CPU ms per step: min ${sorted('cpu')[0].toFixed(4)}, median ${sorted('cpu')[Math.floor(ROUNDS / 2)].toFixed(4)}`);

if (o.callgrind) {
  const out = join(tmpdir(), `measure-plain-step-${process.pid}.callgrind`);
  const n = Number(o.callgrind);
  await withServer(['valgrind', '--tool=callgrind', `--callgrind-out-file=${out}`, '--collect-atstart=no', '--toggle-collect=evalShaCommand'], async (redis, pid) => {
    const tasks = new store.TaskStore(redis, 'measure');
    // The scripts are loaded (EVAL) and warm; the counters start from zero after.
    for (let i = 0; i < 5; i++) await runTask(tasks);
    execFileSync('callgrind_control', ['-z', String(pid)], { stdio: 'ignore' });
    for (let i = 0; i < n; i++) await runTask(tasks);
  });
  const total = /([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS/.exec(execFileSync('callgrind_annotate', [out], { encoding: 'utf8', maxBuffer: 1 << 26 }));
  rmSync(out, { force: true });
  console.log(`  instructions in EVALSHA per step (callgrind, ${n} tasks one at a time): ${Math.round(Number(total[1].replace(/,/g, '')) / (n * 3)).toLocaleString('en')}`);
}
process.exit(0);
