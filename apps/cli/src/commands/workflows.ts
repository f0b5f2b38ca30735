/** `triad workflows`: list, register and show workflow definitions. */
import type { Command } from 'commander';
import { DEFAULT_SUPERVISION, formatBound, formatMs, taskBound, validateDefinition, type Supervision, type TaskBound } from '@triad/core';
import { LadderSchema, type Ladder, type RegisteredWorkflow } from '@triad/protocol';
import { table, truncate } from '../format.js';
import { intArg, readJsonFile } from '../io.js';
import { action, connectionOptions, examples, optionsOf, out, printJson, withClient } from '../runtime.js';

const DEFAULT_LADDER = LadderSchema.parse({});
const DEFINITION_EXAMPLE = `{"name":"orders","steps":[{"name":"charge","agent":"payments"}]}`;

export function register(program: Command): void {
  const group = program
    .command('workflows')
    .description('list registered workflows (see also: workflows register, workflows show)')
    .option('--json', 'print the workflows as a JSON array');
  connectionOptions(group);
  examples(group, ['triad workflows', 'triad workflows register orders.workflow.json', 'triad workflows show orders --version 2']);
  group.action(
    action(async (_opts: unknown, self: Command) => {
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const workflows = await client.listWorkflows();
        if (o.json) {
          printJson(workflows);
          return 0;
        }
        if (workflows.length === 0) {
          out('no workflows registered (register one with: triad workflows register <file>)');
          return 0;
        }
        out(table(['NAME', 'LATEST', 'VERSIONS', 'DESCRIPTION'], workflows.map((w) => [w.name, w.latest, w.versions.join(','), w.description !== undefined ? truncate(w.description, 80) : undefined])));
        return 0;
      });
    }),
  );

  const reg = group
    .command('register')
    .description('register a workflow definition from a JSON file (validated first; every problem is listed)')
    .argument('<file>', 'the JSON definition ("-" for stdin)')
    .option('--json', 'print { name, version, created } as JSON');
  connectionOptions(reg);
  examples(reg, ['triad workflows register orders.workflow.json']);
  reg.action(
    action(async (file: string, _opts: unknown, self: Command) => {
      const o = optionsOf<{ json?: boolean }>(self);
      const definition = readJsonFile(file, 'workflow definition', DEFINITION_EXAMPLE);
      // Checked here too, so a bad file is reported (exit 2, every problem) without a server.
      validateDefinition(definition);
      return withClient(self, async (client) => {
        const r = await client.registerWorkflow(definition as Parameters<typeof client.registerWorkflow>[0]);
        if (o.json) printJson(r);
        else {
          out(r.created ? `registered ${r.name} v${r.version}` : `${r.name} v${r.version} already registered`);
          for (const w of r.warnings ?? []) out(`warning: ${w}`);
        }
        return 0;
      });
    }),
  );

  const show = group
    .command('show')
    .description("print a workflow's steps with the longest time each can take before it escalates, and the task's bound (decision 0009)")
    .argument('<name>', 'the workflow name')
    .option('--version <n>', 'this version (default: the latest)', intArg(1))
    .option('--sweep-interval-ms <ms>', 'the supervisors\' TRIAD_SUPERVISOR_INTERVAL_MS, to turn sweeps into time', intArg(1), DEFAULT_SUPERVISION.sweepIntervalMs)
    .option('--leader-lease-ms <ms>', 'the supervisors\' TRIAD_SUPERVISOR_LEASE_MS (one leader change is allowed for)', intArg(1), DEFAULT_SUPERVISION.leaderLeaseMs)
    .option('--json', 'print { definition, bounds } as JSON')
    .option('--definition', 'print only the JSON definition (what `workflows register` takes)');
  connectionOptions(show);
  examples(show, ['triad workflows show orders', 'triad workflows show orders --version 2 --definition > orders.v2.json']);
  show.action(
    action(async (name: string, _opts: unknown, self: Command) => {
      const o = optionsOf<{ version?: number; sweepIntervalMs: number; leaderLeaseMs: number; json?: boolean; definition?: boolean }>(self);
      return withClient(self, async (client) => {
        const wf = await client.getWorkflow(name, o.version);
        if (o.definition) {
          printJson(wf);
          return 0;
        }
        const supervision = { sweepIntervalMs: o.sweepIntervalMs, leaderLeaseMs: o.leaderLeaseMs };
        const bounds = taskBound(wf, supervision);
        if (o.json) {
          printJson({ definition: wf, bounds, supervision });
          return 0;
        }
        out(describeBounds(wf, bounds, supervision));
        return 0;
      });
    }),
  );
}

/** The operator's view of a definition: per step its policy and how long it can take before it escalates. */
export function describeBounds(wf: RegisteredWorkflow, bounds: TaskBound, supervision: Supervision): string {
  const ladderText = (l: Ladder | undefined): string => {
    const x = l ?? wf.defaults.ladder ?? DEFAULT_LADDER;
    return `${x.retries}/${formatMs(x.longBackoffMs)}/${x.maxFailures}/${x.maxCircuitOpen}`;
  };
  const rows = wf.steps.map((step, i) => {
    const b = bounds.steps[i];
    const c = step.compensate;
    return [
      step.name,
      step.agent,
      formatMs(step.budgetMs),
      ladderText(step.ladder),
      b ? formatBound(b.run, supervision) : undefined,
      c ? `${c.agent} ${formatMs(c.budgetMs)}` : '-',
      b?.compensation ? formatBound(b.compensation, supervision) : '-',
    ];
  });
  const lines = [
    `${wf.name} v${wf.version}${wf.description ? ` — ${wf.description}` : ''}`,
    `on failure: ${wf.onFailure}${wf.deadlineMs !== undefined ? `; task deadline ${formatMs(wf.deadlineMs)}` : ''}`,
    '',
    table(['STEP', 'AGENT', 'BUDGET', 'LADDER r/L/m/c', 'ESCALATES WITHIN', 'COMPENSATION', 'UNDONE WITHIN'], rows),
    '',
    `a task ends within ${formatBound(bounds.total, supervision)}:`,
    `  run   ${formatBound(bounds.run, supervision)}  (the longest dependency path${wf.deadlineMs !== undefined ? ', or the deadline' : ''})`,
    `  undo  ${formatBound(bounds.undo, supervision)}  (what is in flight, then every compensation in turn)`,
    `  and one supervisor leader change (${formatMs(supervision.leaderLeaseMs)}); a sweep is at most ${formatMs(supervision.sweepIntervalMs)} (--sweep-interval-ms)`,
    'Each bound counts every attempt at its whole budget, every park at its whole back-off, and stops at the step\'s give-up time (giveUpAfterMs) plus one budget.',
  ];
  return lines.join('\n');
}
