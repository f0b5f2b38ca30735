/** The `triad` executable (bin/triad.js imports this). */
import { run } from './program.js';

// `triad list | head`: the reader went away; stop quietly instead of crashing with EPIPE.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});

const code = await run(process.argv);
process.exitCode = code;
// The client is closed by then; should anything still hold the event loop (a NATS connection still
// being attempted after a connect timeout), do not hang the shell.
setTimeout(() => process.exit(code), 1_000).unref();
