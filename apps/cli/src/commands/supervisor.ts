/** `triad supervisor`: who leads, with which epoch, when each supervisor last swept, and the lag. */
import type { Command } from 'commander';
import { duration, isoTime, table } from '../format.js';
import { out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program.command('supervisor').description('show the supervisor leader, its epoch, the last sweeps and the lag').option('--json', 'print the status as JSON');
  connectionOptions(cmd);
  examples(cmd, ['triad supervisor']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const s = await client.supervisorStatus();
        const now = Date.now();
        const leader = s.supervisors.find((r) => r.supervisorId === s.leader?.id);
        // Lag: how long ago the leader last finished a sweep (a healthy one sweeps every interval).
        const lagMs = leader?.lastSweepAt !== undefined ? now - leader.lastSweepAt : undefined;
        if (o.json) {
          printJson({ ...s, lagMs: lagMs ?? null });
          return 0;
        }
        out(s.leader ? `leader ${s.leader.id}, epoch ${s.leader.epoch}${lagMs !== undefined ? `, last sweep ${duration(lagMs)} ago` : ''}` : 'no leader: is a supervisor running in this namespace?');
        if (s.supervisors.length > 0) {
          out('');
          out(
            table(
              ['SUPERVISOR', 'LEADING', 'EPOCH', 'LAST SWEEP', 'SWEEP', 'EXPIRED WAITING', 'RETRIES', 'PARKED', 'ERRORS', 'PURGED', 'COMPACTED', 'FENCED', 'REPORTED'],
              s.supervisors.map((r) => [
                r.supervisorId,
                r.leading ? 'yes' : 'no',
                r.epoch,
                isoTime(r.lastSweepAt),
                r.sweepMs !== undefined ? duration(r.sweepMs) : undefined,
                r.expiredWaiting,
                r.retries,
                r.parked,
                r.errors,
                r.purged,
                r.compacted,
                r.fencedWrites,
                isoTime(r.at),
              ]),
            ),
          );
        }
        return 0;
      });
    }),
  );
}
