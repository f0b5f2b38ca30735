/**
 * The benchmark's agents, run by the generic host (`node apps/agent/dist/main.js apps/bench/dist/bench-agents.js`):
 * `noop` returns at once, `io10` awaits a 10 ms timer (an I/O-bound call), `stall` hangs on its first
 * attempt when the input asks for it (so a test can kill the process mid-step). BENCH_AGENTS picks
 * which ones a process runs, so each measurement controls exactly which processes serve which agent.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { defineAgent, type AgentDefinition } from '@triad/agent';

/** Concurrency of io10 per process: low on purpose, so one process is the bottleneck and scaling shows. */
const IO_CONCURRENCY = Number(process.env['BENCH_IO_CONCURRENCY'] ?? 4);

const noop = defineAgent({
  name: 'noop',
  // Returns the input's `payload` (a throughput run with --payload-bytes), else {}.
  handler: ({ input }) => Promise.resolve((input as { payload?: unknown } | undefined)?.payload ?? {}),
});

const io10 = defineAgent({
  name: 'io10',
  concurrency: IO_CONCURRENCY,
  async handler({ signal }) {
    await delay(10, undefined, { signal });
    return {};
  },
});

const stall = defineAgent<{ stall?: boolean } | undefined>({
  name: 'stall',
  async handler({ input, attempt, taskId, signal }) {
    if (input?.stall && attempt === 1) {
      // The recovery measurement waits for this line to know this process holds the step.
      process.stdout.write(`bench-stall-started ${taskId}\n`);
      await delay(60_000, undefined, { signal }).catch(() => undefined);
    }
    return {};
  },
});

/** Every agent this module can run, by name (an object, not an agent: the host does not load it as one). */
export const benchAgentsByName: Readonly<Record<string, AgentDefinition>> = { noop, io10, stall };

function selected(list: string | undefined): AgentDefinition[] {
  const wanted = (list ?? 'noop,io10,stall').split(',').map((s) => s.trim()).filter(Boolean);
  return wanted.map((n) => {
    const a = benchAgentsByName[n];
    if (!a) throw new Error(`BENCH_AGENTS names an unknown agent "${n}" (known: ${Object.keys(benchAgentsByName).join(', ')})`);
    return a;
  });
}

/** What the host loads: the agents BENCH_AGENTS names (all of them by default). */
export const agents: AgentDefinition[] = selected(process.env['BENCH_AGENTS']);
