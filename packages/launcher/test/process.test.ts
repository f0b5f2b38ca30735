/**
 * What the bench and npm start rely on beyond the harness' own tests (test/integration/harness.test.ts):
 * a clear error for a missing binary, a configurable grace for stop(), terminateAll(), and that a
 * program with its own shutdown keeps its signals. Nothing here asserts how long anything takes.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startProcess, terminateAll, type StartedProcess } from '../src/index.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const started: StartedProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
});

async function start(name: string, script: string, readyPattern = /^up$/): Promise<StartedProcess> {
  const p = await startProcess({ name, args: ['--input-type=module', '-e', script], cwd: REPO_ROOT, readyPattern });
  started.push(p);
  return p;
}

/** Prints "up"; on SIGTERM takes `ms` (as a --cpu-prof profile being written) and exits with code 7. */
const slowToStop = (ms: number): string =>
  `process.on('SIGTERM', () => setTimeout(() => { console.log('wrote profile'); process.exit(7); }, ${ms}));
   console.log('up');
   setInterval(() => {}, 1000);`;

describe('startProcess', () => {
  it('names the process and the binary when the binary is missing', async () => {
    await expect(startProcess({ name: 'ghost', command: '/nonexistent/triad-no-such-server', args: [] })).rejects.toThrow(
      /^ghost: could not start \/nonexistent\/triad-no-such-server: spawn \/nonexistent\/triad-no-such-server ENOENT \(not found: is it installed, and on PATH\?\)$/,
    );
  });

  it('stop(graceMs) waits that long for a graceful exit, then SIGKILLs', async () => {
    const patient = await start('patient', slowToStop(300));
    await patient.stop(10_000);
    expect(await patient.exited).toBe(7);
    expect(patient.output()).toContain('wrote profile');

    const hasty = await start('hasty', slowToStop(60_000));
    await hasty.stop(100);
    expect(await hasty.exited).toBeNull();
    expect(hasty.isRunning()).toBe(false);
  });

  it('tail() holds the last output, for error messages', async () => {
    const chatty = await start('chatty', `for (let i = 0; i < 1000; i++) console.log('line ' + i); console.log('up'); setInterval(() => {}, 1000);`);
    expect(chatty.tail(20)).toBe('…ine 998\nline 999\nup\n');
    await chatty.stop();
  });
});

describe('terminateAll', () => {
  it('stops every child still running, each gracefully', async () => {
    const a = await start('a', slowToStop(50));
    const b = await start('b', slowToStop(50));
    await terminateAll(10_000);
    expect(await a.exited).toBe(7);
    expect(await b.exited).toBe(7);
  });
});

describe('killChildrenOnSignals(false)', () => {
  it('leaves SIGTERM to the program, whose own shutdown stops the children gracefully', async () => {
    // A program like the bench: its own SIGTERM handler, stopping its children with a grace period.
    const program = await start(
      'program',
      `const { killChildrenOnSignals, startProcess, terminateAll } = await import('@triad/launcher');
       killChildrenOnSignals(false);
       const child = await startProcess({ name: 'child', args: ['--input-type=module', '-e', ${JSON.stringify(slowToStop(200))}], readyPattern: /^up$/ });
       process.once('SIGTERM', () => void terminateAll(10_000).then(async () => {
         console.log('child exited ' + (await child.exited));
         process.exit(0);
       }));
       console.log('up');`,
    );
    program.signal('SIGTERM');
    expect(await program.exited).toBe(0);
    expect(program.output()).toContain('child exited 7');
  });
});

describe('startProcess({ group: true })', () => {
  it('signals the whole process group, as a Ctrl-C reaches a command and what it started', async () => {
    // A shell that starts a grandchild and waits: SIGINT to the shell alone would leave the grandchild.
    const p = await startProcess({
      name: 'group',
      command: '/bin/sh',
      args: ['-c', `node -e "process.on('SIGINT', () => { console.log('grandchild got SIGINT'); process.exit(0); }); console.log('up'); setInterval(() => {}, 1000);"; echo 'shell done'`],
      group: true,
      readyPattern: /^up$/,
    });
    started.push(p);
    p.signal('SIGINT');
    await p.waitForOutput(/grandchild got SIGINT/, 10_000);
    await p.exited;
    expect(p.isRunning()).toBe(false);
  });
});
