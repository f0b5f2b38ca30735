/** `triad dlq`: dead letters with their reasons and decoded originals; `triad dlq replay <seq>` re-publishes one. */
import type { Command } from 'commander';
import type { StoredDeadLetter } from '@triad/client';
import { isoTime, table, truncate } from '../format.js';
import { intArg, out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const dlq = program
    .command('dlq')
    .description('list dead letters (messages a consumer refused), newest first, with the reason and the decoded message')
    .option('--source <source>', 'only this source: submit, result, command or step.<agent>')
    .option('--limit <n>', 'at most this many (default 50)', intArg(1, 10_000))
    .option('--json', 'print them as a JSON array (the decoded original included)');
  connectionOptions(dlq);
  examples(dlq, ['triad dlq', 'triad dlq --source step.payment --json', 'triad dlq replay 42']);
  dlq.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ source?: string; limit?: number; json?: boolean }>(self);
      return withClient(self, async (client) => {
        const letters = await client.deadLetters({ ...(o.source !== undefined ? { source: o.source } : {}), limit: o.limit ?? 50 });
        if (o.json) {
          printJson(letters);
          return 0;
        }
        if (letters.length === 0) {
          out(o.source === undefined ? 'no dead letters' : `no dead letters from ${o.source}`);
          return 0;
        }
        out(table(['SEQ', 'RECEIVED', 'SOURCE', 'SUBJECT', 'DELIVERIES', 'REASON'], letters.map((d) => [d.seq, isoTime(d.receivedAt), d.source, d.subject ?? '?', d.deliveries, truncate(d.reason, 100)])));
        for (const d of letters) out(`\n#${d.seq} ${originalText(d)}`);
        out(`\nre-publish one to its subject once its cause is fixed: triad dlq replay <seq>`);
        return 0;
      });
    }),
  );

  const replay = dlq
    .command('replay')
    .argument('<seq>', 'the dead letter\'s sequence number (the SEQ column of triad dlq)', intArg(1))
    .description('re-publish dead letter <seq> to the subject it arrived on, with its headers (a new message id)')
    .option('--json', 'print { seq, subject, stream, storedSeq, duplicate } as JSON');
  connectionOptions(replay);
  examples(replay, ['triad dlq replay 42']);
  replay.action(
    action(async (seq: number, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const r = await client.replayDeadLetter(seq);
        if (o.json) printJson(r);
        else if (r.duplicate) out(`dead letter ${seq} was replayed to ${r.subject} a moment ago (within the stream's duplicate window): not sent again`);
        else out(`replayed dead letter ${seq} to ${r.subject} (stored as ${r.stream} #${r.storedSeq})`);
        return 0;
      });
    }),
  );
}

/** The original as one line: its msgpack value as JSON, or a byte preview. */
function originalText(d: StoredDeadLetter): string {
  const o = d.original;
  if (o.format === 'msgpack') return `${o.bytes} bytes, msgpack: ${truncate(JSON.stringify(o.value) ?? 'undefined', 400)}`;
  return `${o.bytes} bytes, not msgpack (${truncate(o.error, 120)}): hex ${o.hex.slice(0, 128)}${o.truncated || o.hex.length > 128 ? '…' : ''} base64 ${o.base64.slice(0, 96)}${o.truncated || o.base64.length > 96 ? '…' : ''}`;
}
