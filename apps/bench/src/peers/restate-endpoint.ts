/**
 * The Restate peer's service endpoint (its own process, as a Restate deployment runs it): `chain.run(S)`
 * makes S sequential durable calls to the no-op handler `noop.step`. Reads RESTATE_ENDPOINT_PORT.
 */
import * as restate from '@restatedev/restate-sdk';
import { z } from 'zod';

const { RESTATE_ENDPOINT_PORT: port } = z.object({ RESTATE_ENDPOINT_PORT: z.coerce.number().int().min(1).max(65535) }).parse(process.env);

const noop = restate.service({
  name: 'noop',
  handlers: {
    step: (_ctx: restate.Context, i: number): Promise<number> => Promise.resolve(i),
  },
});

const chain = restate.service({
  name: 'chain',
  handlers: {
    run: async (ctx: restate.Context, steps: number): Promise<number> => {
      for (let i = 1; i <= steps; i++) await ctx.serviceClient(noop).step(i);
      return steps;
    },
  },
});

restate
  .endpoint()
  .bind(noop)
  .bind(chain)
  .listen(port)
  .then(() => process.stdout.write('restate-endpoint ready\n'))
  .catch((e: unknown) => {
    process.stderr.write(`restate-endpoint: ${String(e)}\n`);
    process.exit(1);
  });
