/** `triad workflows`: list, register and show workflow definitions. */
import type { Command } from 'commander';
import { table, truncate } from '../format.js';
import { intArg, out, printJson, readJsonFile } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

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
      const { withClient } = await import('../runtime.js');
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
      const [{ withClient }, { validateDefinition }] = await Promise.all([import('../runtime.js'), import('@triad/core')]);
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
    .option('--sweep-interval-ms <ms>', "the supervisors' TRIAD_SUPERVISOR_INTERVAL_MS, to turn sweeps into time (default: the supervisor's default)", intArg(1))
    .option('--leader-lease-ms <ms>', "the supervisors' TRIAD_SUPERVISOR_LEASE_MS; one leader change is allowed for (default: the supervisor's default)", intArg(1))
    .option('--json', 'print { definition, bounds } as JSON')
    .option('--definition', 'print only the JSON definition (what `workflows register` takes)');
  connectionOptions(show);
  examples(show, ['triad workflows show orders', 'triad workflows show orders --version 2 --definition > orders.v2.json']);
  show.action(
    action(async (name: string, _opts: unknown, self: Command) => {
      const [{ withClient }, { DEFAULT_SUPERVISION, taskBound }, { childResolver, describeBounds, describeLimitsNow }, { ErrorCode, isTriadError }] = await Promise.all([
        import('../runtime.js'),
        import('@triad/core'),
        import('../bounds-text.js'),
        import('@triad/protocol'),
      ]);
      const o = optionsOf<{ version?: number; sweepIntervalMs?: number; leaderLeaseMs?: number; json?: boolean; definition?: boolean }>(self);
      return withClient(self, async (client) => {
        const wf = await client.getWorkflow(name, o.version);
        if (o.definition) {
          printJson(wf);
          return 0;
        }
        const supervision = { sweepIntervalMs: o.sweepIntervalMs ?? DEFAULT_SUPERVISION.sweepIntervalMs, leaderLeaseMs: o.leaderLeaseMs ?? DEFAULT_SUPERVISION.leaderLeaseMs };
        // A child step's bound is its child workflow's: looked up now (unknown if not registered).
        const children = await childResolver(wf, (n, v) =>
          client.getWorkflow(n, v).catch((e: unknown) => {
            if (isTriadError(e, ErrorCode.UnknownWorkflow)) return undefined;
            throw e;
          }),
        );
        const bounds = taskBound(wf, supervision, children);
        if (o.json) {
          printJson({ definition: wf, bounds, supervision });
          return 0;
        }
        out(describeBounds(wf, bounds, supervision));
        // The dispatch limits on its agent types (decision 0020 §5.6): an operator's to read; others see the bounds only.
        const limits = await client.agentLimits({}).catch(() => []);
        const limitsText = describeLimitsNow(wf, limits);
        if (limitsText) out(`\n${limitsText}`);
        return 0;
      });
    }),
  );
}
