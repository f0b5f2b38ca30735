/** The conformance kit's command line: `--agent-cmd "<command>" [--agent <type>] [--service-env VAR] [--instances N] [--json]`. */
import { z } from 'zod';
import { NAME_PATTERN } from '@triad/protocol';
import type { CliSpec } from '../support/cli.js';

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

const GIVE_AGENT_CMD = 'give the agent command, e.g. --agent-cmd "examples/go/dist/triad-go-agent -agent fraud"';

const OptionsSchema = z
  .object({
    agentCmd: z.string({ error: GIVE_AGENT_CMD }).trim().min(1, GIVE_AGENT_CMD),
    agent: z.string().regex(NAME_PATTERN, 'must be an agent type: a letter then up to 63 letters, digits, _ or -').default('fraud'),
    serviceEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name (letters, digits, _)').default('FRAUD_URL'),
    instances: z.coerce.number().int().min(1).max(8).default(2),
    readyTimeoutMs: z.coerce.number().int().min(1_000).default(30_000),
    json: z.boolean().default(false),
  })
  .strict();
export type KitOptions = z.output<typeof OptionsSchema>;

export const CONFORMANCE_CLI: CliSpec<typeof OptionsSchema> = {
  name: 'conformance',
  usage: USAGE,
  flags: {
    'agent-cmd': { type: 'string' },
    agent: { type: 'string' },
    'service-env': { type: 'string' },
    instances: { type: 'string' },
    'ready-timeout-ms': { type: 'string' },
    json: { type: 'boolean' },
  },
  schema: OptionsSchema,
};
