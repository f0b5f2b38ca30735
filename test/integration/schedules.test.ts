// Schedules on real processes (decision 0019 §6; increment 8): the leader supervisor fires each tick
// exactly once, as task `sch:<name>:<tick>`. An `--every 2s` schedule runs through a kill -9 of the
// leader: the tasks it fired are exactly the ticks from the first to the last — consecutive, none
// missing, none twice (the schedule's fired counter equals the distinct tasks) — a count, not a timing.
// The CLI creates, lists, pauses, resumes and deletes one; overlap skip fires no second task while the
// first still runs; bad timings and unknown workflows are refused with the reason.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Schedule, TaskSummary, WorkflowDefinitionInput } from '@triad/protocol';
import { keys } from '@triad/store';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { cli, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let t: TestTriad;

const supervisor = { intervalMs: 200, leaseMs: 1_500 };
/** A task that needs no agent: it sleeps a moment and completes (the supervisor wakes it). */
const nap: WorkflowDefinitionInput = { name: 'nap', steps: [{ name: 'rest', sleep: { ms: 100 } }] };
/** A task that outlasts many ticks: overlap skip must not start a second one beside it. */
const longNap: WorkflowDefinitionInput = { name: 'long-nap', steps: [{ name: 'rest', sleep: { ms: 120_000 } }] };

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  // Port 0: each process serves /metrics on a free port and says which (its log line).
  t = await startTriad(td, { nats, redis }, { registerOrders: false, agentProcesses: 0, supervisor, supervisors: 2, env: { TRIAD_HTTP_PORT: '0', TRIAD_HTTP_HOST: '127.0.0.1' } });
  await t.client.registerWorkflow(nap);
  await t.client.registerWorkflow(longNap);
});

async function leader(): Promise<{ id: string; epoch: number } | undefined> {
  const v = await t.redis.get(keys(t.namespace).supervisorLeader);
  if (!v) return undefined;
  const [id, epoch] = v.split('|');
  return { id: id!, epoch: Number(epoch) };
}

/** `triad_schedule_ticks_total{action}` as the current leader supervisor serves it on /metrics. */
async function leaderTicks(action: string): Promise<number> {
  const l = await leader();
  const p = l && t.supervisors.find((x) => x.output().includes(l.id));
  const port = p && /serving \/metrics, \/healthz and \/readyz on port (\d+)/.exec(p.output())?.[1];
  if (!port) throw new Error('the leader supervisor does not say which port it serves /metrics on');
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((x) => x.startsWith('triad_schedule_ticks_total{') && x.includes(`namespace="${t.namespace}"`) && x.includes(`action="${action}"`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

/** A command line's words as sh reads them (single and double quotes; enough for the README's lines). */
function shellWords(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
}

/** The tasks a schedule fired (from the tasks the schedulers recorded), by tick. */
async function firedTasks(name: string): Promise<{ taskId: string; tick: number; task: TaskSummary }[]> {
  const prefix = `sch:${name}:`;
  const all = await t.client.listTasks({ limit: 2_000 });
  return all
    .filter((x) => x.taskId.startsWith(prefix))
    .map((task) => ({ taskId: task.taskId, tick: Number(task.taskId.slice(prefix.length)), task }))
    .sort((a, b) => a.tick - b.tick);
}

describe('schedules', () => {
  it('an --every 2s schedule fires each tick once, through a kill -9 of the supervisor leader: consecutive ticks, none missing, none twice', async () => {
    const created = await t.client.createSchedule('beat', { workflow: 'nap', every: '2s', overlap: 'allow', input: { n: 1 } });
    expect(created).toMatchObject({ name: 'beat', created: true, every: 2_000, overlap: 'allow', paused: false, fired: 0, client: 'default', input: { n: 1 } });
    const anchor = created.createdAt;

    // A few ticks fired by the first leader, then it dies.
    await waitFor(async () => ((await t.client.getSchedule('beat')).fired >= 3 ? true : undefined), { timeoutMs: 30_000, what: 'three ticks fired' });
    const first = await waitFor(() => leader(), { timeoutMs: 10_000, what: 'a leader' });
    const victim = t.supervisors.find((p) => p.output().includes(first.id));
    expect(victim, 'the leader is one of our supervisor processes').toBeDefined();
    await victim!.kill('SIGKILL');
    const next = await waitFor(async () => {
      const l = await leader();
      return l && l.id !== first.id ? l : undefined;
    }, { timeoutMs: 15_000, intervalMs: 20, what: 'a new leader' });
    expect(next.epoch).toBeGreaterThan(first.epoch);

    // The new leader fires on (the ticks of the failover included) until about ten in all.
    let seen = 0;
    await waitFor(async () => {
      seen = (await t.client.getSchedule('beat')).fired;
      return seen >= 10 ? true : undefined;
    }, { timeoutMs: 60_000, what: 'ten ticks fired', lastSeen: () => `${seen} fired` });
    const paused = await t.client.pauseSchedule('beat');
    expect(paused.paused).toBe(true);

    // Every fired tick became its task (the outbox is published after the fire).
    const final = await t.client.getSchedule('beat');
    const fired = await waitFor(async () => {
      const f = await firedTasks('beat');
      return f.length >= final.fired ? f : undefined;
    }, { timeoutMs: 30_000, what: `${final.fired} scheduled tasks recorded` });
    // None twice: the record counted exactly as many fires as there are distinct tasks.
    expect(new Set(fired.map((f) => f.taskId)).size).toBe(fired.length);
    expect(fired.length).toBe(final.fired);
    expect(final.skipped).toBe(0);
    expect(final.missed).toBe(0);
    // Consecutive ticks from the first to the last, none missing: anchor + k·2000 for k = 1, 2, …, n.
    expect(fired.map((f) => f.tick)).toEqual(fired.map((_, i) => anchor + (i + 1) * 2_000));
    expect(final.lastTick).toBe(fired.at(-1)!.tick);
    expect(final.lastTaskId).toBe(fired.at(-1)!.taskId);
    // The tasks are the schedule's client's, with its input, and run to the end.
    const one = await t.client.wait(fired[0]!.taskId, { timeoutMs: 30_000 });
    expect(one).toMatchObject({ status: 'completed', workflow: 'nap', client: 'default', input: { n: 1 } });
    await t.client.deleteSchedule('beat');
  });

  it('the CLI creates, lists, pauses, resumes and deletes a schedule; a paused one fires nothing', async () => {
    const made = await cli(t, ['schedules', 'create', 'cli-beat', '--workflow', 'nap', '--every', '1s', '--input', '{"from":"cli"}', '--overlap', 'allow']);
    expect(made.stderr).toBe('');
    expect(made.code).toBe(0);
    expect(made.stdout).toMatch(/^schedule cli-beat created: every 1s, workflow nap, tasks of client default; next tick \d{4}-\d\d-\d\dT.*\(task sch:cli-beat:\d+\)/);

    const listed = await cli(t, ['schedules', 'list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^NAME\s+WORKFLOW\s+WHEN\s+OVERLAP\s+PAUSED\s+NEXT TICK\s+LAST TICK\s+LAST TASK\s+FIRED\s+SKIPPED\s+MISSED/);
    expect(listed.stdout).toMatch(/^cli-beat\s+nap\s+every 1s\s+allow\s+no\s/m);

    await waitFor(async () => ((await t.client.getSchedule('cli-beat')).fired >= 2 ? true : undefined), { timeoutMs: 30_000, what: 'two ticks fired' });
    const pause = await cli(t, ['schedules', 'pause', 'cli-beat']);
    expect(pause.code).toBe(0);
    expect(pause.stdout).toMatch(/schedule cli-beat paused/);
    const atPause = await t.client.getSchedule('cli-beat');
    const json = await cli(t, ['schedules', 'list', '--json']);
    const asJson = JSON.parse(json.stdout) as Schedule[];
    expect(asJson.find((s) => s.name === 'cli-beat')).toMatchObject({ paused: true, workflow: 'nap', every: 1_000, input: { from: 'cli' } });
    expect(asJson.find((s) => s.name === 'cli-beat')?.nextTick).toBeUndefined();
    // Paused: the leader sweeps on (its reported last sweep moves past a few ticks) and nothing more fires.
    const lastSweep = async (): Promise<number> => Math.max(0, ...(await t.client.supervisorStatus()).supervisors.filter((x) => x.leading).map((x) => x.lastSweepAt ?? 0));
    const pausedAt = Date.now();
    await waitFor(async () => ((await lastSweep()) > pausedAt + 2_500 ? true : undefined), { timeoutMs: 30_000, what: 'the leader to sweep on past a few ticks of the paused schedule' });
    expect((await t.client.getSchedule('cli-beat')).fired).toBe(atPause.fired);

    const resumeAsked = Date.now();
    const resume = await cli(t, ['schedules', 'resume', 'cli-beat']);
    expect(resume.code).toBe(0);
    expect(resume.stdout).toMatch(/schedule cli-beat resumed: next tick .*\(the paused period is not caught up\)/);
    const resumed = await waitFor(async () => {
      const x = await t.client.getSchedule('cli-beat');
      return x.fired > atPause.fired ? x : undefined;
    }, { timeoutMs: 30_000, what: 'a tick fired after the resume' });
    // Not caught up: no tick of the paused period fired (every tick is before the pause or after the
    // resume was asked for), and none was counted missed.
    expect(resumed.missed).toBe(0);
    const ticks = await waitFor(async () => {
      const f = await firedTasks('cli-beat');
      return f.length >= resumed.fired ? f.map((x) => x.tick) : undefined;
    }, { timeoutMs: 30_000, what: 'the fired tasks recorded' });
    expect(ticks.filter((tick) => tick > atPause.lastTick! && tick <= resumeAsked)).toEqual([]);
    expect(ticks.filter((tick) => tick > resumeAsked).length).toBeGreaterThanOrEqual(1);

    const del = await cli(t, ['schedules', 'delete', 'cli-beat']);
    expect(del.code).toBe(0);
    expect(del.stdout).toMatch(/schedule cli-beat deleted/);
    await expect(t.client.getSchedule('cli-beat')).rejects.toMatchObject({ code: 'UNKNOWN_SCHEDULE', message: 'no schedule "cli-beat": list them with triad schedules list' });
    const gone = await cli(t, ['schedules', 'list', '--json']);
    expect((JSON.parse(gone.stdout) as Schedule[]).map((s) => s.name)).not.toContain('cli-beat');
  });

  it('overlap skip: while the last task still runs, ticks are skipped and counted, not fired', async () => {
    await t.client.createSchedule('slow', { workflow: 'long-nap', every: '1s' });
    const s = await waitFor(async () => {
      const x = await t.client.getSchedule('slow');
      return x.skipped >= 3 ? x : undefined;
    }, { timeoutMs: 30_000, what: 'three ticks skipped' });
    await t.client.pauseSchedule('slow');
    expect(s.fired).toBe(1);
    // Counted by the leader's telemetry interceptor too.
    expect(await leaderTicks('skipped')).toBeGreaterThanOrEqual(3);
    expect(await leaderTicks('fired')).toBeGreaterThanOrEqual(1);
    const fired = await waitFor(async () => {
      const f = await firedTasks('slow');
      return f.length >= 1 ? f : undefined;
    }, { timeoutMs: 15_000, what: 'the one task recorded' });
    expect(fired.map((f) => f.taskId)).toEqual([s.lastTaskId]);
    expect((await t.client.getTask(fired[0]!.taskId)).status).toBe('running');
    await t.client.cancel(fired[0]!.taskId);
    await t.client.deleteSchedule('slow');
  });

  it("the README's schedules commands run as shown", async () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const block = /\*\*Schedules\*\*[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const lines = block.split('\n').map((l) => l.replace(/\s+#.*$/, '').trim()).filter((l) => l.startsWith('npx triad schedules '));
    expect(lines.length, 'the README shows the schedules commands').toBeGreaterThanOrEqual(6);
    await t.client.registerWorkflow({ ...nap, name: 'report' });
    await t.client.registerWorkflow({ ...nap, name: 'ping' });
    for (const line of lines) {
      const r = await cli(t, shellWords(line).slice(2));
      expect({ line, code: r.code, stderr: r.stderr }).toEqual({ line, code: 0, stderr: '' });
    }
    // What they did: nightly created, paused, resumed and deleted; heartbeat still there.
    expect((await t.client.listSchedules()).map((s) => s.name)).toContain('heartbeat');
    await expect(t.client.getSchedule('nightly')).rejects.toMatchObject({ code: 'UNKNOWN_SCHEDULE' });
    await t.client.deleteSchedule('heartbeat');
  });

  it('refuses a schedule with the reason: both or neither timing, a bad interval or pattern, an unknown workflow, a taken name', async () => {
    await expect(t.client.createSchedule('bad', { workflow: 'nap' })).rejects.toMatchObject({ code: 'INVALID_MESSAGE', message: expect.stringMatching(/give exactly one of --every \(e\.g\. 10s\) and --cron/) });
    await expect(t.client.createSchedule('bad', { workflow: 'nap', every: '500ms' })).rejects.toMatchObject({ code: 'INVALID_MESSAGE', message: expect.stringMatching(/out of range: a schedule fires at most once a second/) });
    await expect(t.client.createSchedule('bad', { workflow: 'nap', cron: '61 * * * *' })).rejects.toMatchObject({ code: 'INVALID_MESSAGE', message: expect.stringMatching(/cron "61 \* \* \* \*" is not valid/) });
    await expect(t.client.createSchedule('bad', { workflow: 'nap', cron: '0 2 * * *', timezone: 'Mars/Olympus' })).rejects.toMatchObject({ code: 'INVALID_MESSAGE', message: expect.stringMatching(/time zone "Mars\/Olympus" is not an IANA time zone/) });
    await expect(t.client.createSchedule('bad', { workflow: 'nowhere', every: '10s' })).rejects.toMatchObject({ code: 'UNKNOWN_WORKFLOW', message: expect.stringMatching(/unknown workflow "nowhere": register it first/) });
    await expect(t.client.createSchedule('bad', { workflow: 'nap', version: 9, every: '10s' })).rejects.toMatchObject({ code: 'UNKNOWN_WORKFLOW' });
    await t.client.createSchedule('taken', { workflow: 'nap', cron: '0 2 * * *', timezone: 'Europe/Paris' });
    await expect(t.client.createSchedule('taken', { workflow: 'nap', every: '10s' })).rejects.toMatchObject({ code: 'INVALID_STATE', message: 'schedule "taken" exists: use --replace to change it (replace: true in the SDK)' });
    const replaced = await t.client.createSchedule('taken', { workflow: 'nap', every: '1d', replace: true });
    expect(replaced).toMatchObject({ created: false, every: 86_400_000, generation: 2 });
    expect(replaced.cron).toBeUndefined();
    // The CLI says the same before connecting (exit 2).
    const both = await cli(t, ['schedules', 'create', 'bad', '--workflow', 'nap', '--every', '10s', '--cron', '0 2 * * *']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give exactly one of --every/);
    await t.client.deleteSchedule('taken');
  });
});
