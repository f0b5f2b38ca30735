/** The conformance kit's command line: `--agent-cmd "<command>" [--agent <type>] [--service-env VAR] [--instances N] [--json]`. */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { NAME_PATTERN } from '@triad/protocol';

export const USAGE = `usage: npm run conformance -- --agent-cmd "<command>" [--agent <type>] [--service-env VAR] [--instances N] [--ready-timeout-ms N] [--json]
  --agent-cmd "<command>"  the agent to test, run as: sh -c "exec <command>" (e.g. "examples/go/dist/triad-go-agent -agent fraud",
                           or "env ORDERS_AGENTS=inventory node apps/example-orders/dist/agents.js")
  --agent <type>           the agent type it serves (default fraud): its requests go to triad.<ns>.step.<type>
  --service-env VAR        the variable the agent reads its service's URL from (default FRAUD_URL); the kit sets it
                           to its stand-in service (POST /apply, POST /undo: the example services' API)
  --instances N            agent processes run at once, sharing the durable consumer (default 2)
  --ready-timeout-ms N     how long the agent may take to start pulling requests (default 30000)
  --json                   print only the JSON report (the last line of output)
The kit also sets NATS_URL and TRIAD_NAMESPACE for the agent. Exit code: 0 every case passed, 1 some failed, 2 bad options.`;

const OptionsSchema = z
  .object({
    agentCmd: z.string().trim().min(1, 'give the agent command, e.g. --agent-cmd "examples/go/dist/triad-go-agent -agent fraud"'),
    agent: z.string().regex(NAME_PATTERN, 'an agent type is a letter then up to 63 letters, digits, _ or -').default('fraud'),
    serviceEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name (letters, digits, _)').default('FRAUD_URL'),
    instances: z.coerce.number().int().min(1).max(8).default(2),
    readyTimeoutMs: z.coerce.number().int().min(1_000).default(30_000),
    json: z.boolean().default(false),
    help: z.boolean().default(false),
  })
  .strict();
export type KitOptions = z.output<typeof OptionsSchema>;

const FLAGS: Record<string, string> = { agentCmd: '--agent-cmd', serviceEnv: '--service-env', readyTimeoutMs: '--ready-timeout-ms' };

/** Parses argv (without node and the script); throws an Error saying what was wrong and showing the usage. */
export function parseOptions(argv: readonly string[]): KitOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        'agent-cmd': { type: 'string' },
        agent: { type: 'string' },
        'service-env': { type: 'string' },
        instances: { type: 'string' },
        'ready-timeout-ms': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${USAGE}`);
  }
  if (values['help'] === true) return { agentCmd: '-', agent: 'fraud', serviceEnv: 'FRAUD_URL', instances: 2, readyTimeoutMs: 30_000, json: false, help: true };
  const { 'agent-cmd': agentCmd, 'service-env': serviceEnv, 'ready-timeout-ms': readyTimeoutMs, ...rest } = values;
  const parsed = OptionsSchema.safeParse({ ...rest, agentCmd: agentCmd ?? '', serviceEnv, readyTimeoutMs });
  if (!parsed.success) {
    const flag = (key: unknown): string => FLAGS[String(key)] ?? `--${String(key)}`;
    throw new Error(`${parsed.error.issues.map((i) => `${flag(i.path[0])}: ${i.message}`).join('; ')}\n${USAGE}`);
  }
  return parsed.data;
}
