/**
 * `triad dlq`: dead letters with their reasons, decoded originals, where a replay would go and who may
 * have written them; `triad dlq replay <seq>` shows exactly what it would publish, then publishes it to
 * the letter's own source once confirmed (decision 0022).
 */
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import type { StoredDeadLetter } from '@triad/client';
import { isoTime, keyValues, table, truncate } from '../format.js';
import { CliError, ExitCode, err, intArg, out, printJson } from '../io.js';
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
        for (const d of letters) {
          out(`\n#${d.seq} ${originalText(d)}`);
          out(`  replay: ${d.replay.ok ? `to ${d.replay.subject}` : `no — ${d.replay.reason}`}`);
          if (d.writer.warning) out(`  warning: ${d.writer.warning}`);
        }
        out(`\nre-publish one to its source once its cause is fixed: triad dlq replay <seq> (shows what it publishes first)`);
        return 0;
      });
    }),
  );

  const replay = dlq
    .command('replay')
    .argument('<seq>', 'the dead letter\'s sequence number (the SEQ column of triad dlq)', intArg(1))
    .description(
      "re-publish dead letter <seq>'s original to its own source (the subject its dead-letter subject names: a submission, result, command or step request; never an API subject), with the protocol's headers and a new message id; shows what it will publish and asks first",
    )
    .option('--yes', 'publish without asking (needed when stdin is not a terminal)')
    .option('--dry-run', 'only show what would be published')
    .option('--json', 'print { preview, replayed? } as JSON: the plan, and JetStream\'s answer { seq, subject, stream, storedSeq, duplicate }');
  connectionOptions(replay);
  examples(replay, ['triad dlq replay 42 --dry-run', 'triad dlq replay 42', 'triad dlq replay 42 --yes --json']);
  replay.action(
    action(async (seq: number, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ yes?: boolean; dryRun?: boolean; json?: boolean }>(self);
      return withClient(self, async (client) => {
        const d = await client.deadLetter(seq);
        const preview = { seq, source: d.source, reason: d.reason, writer: d.writer, replay: d.replay, original: d.original };
        const say = o.json ? err : out;
        if (!o.json) for (const line of previewLines(d)) out(line);
        if (!d.replay.ok) {
          if (o.json) printJson({ preview });
          throw new CliError(`dead letter ${seq} is not replayed: ${d.replay.reason}`, { exitCode: ExitCode.Failure });
        }
        if (o.dryRun) {
          if (o.json) printJson({ preview });
          else out('dry run: nothing was published');
          return 0;
        }
        if (!o.yes) {
          if (!process.stdin.isTTY) {
            if (o.json) printJson({ preview });
            throw new CliError(`not published: confirm with --yes (stdin is not a terminal to ask on), or look first with --dry-run`, { exitCode: ExitCode.Usage });
          }
          if (!(await confirm(`publish it to ${d.replay.subject}? [y/N] `))) {
            say('not published');
            return ExitCode.Failure;
          }
        }
        // The subject shown is the subject published to: a letter changed meanwhile is refused.
        const r = await client.replayDeadLetter(seq, { expectSubject: d.replay.subject });
        if (o.json) printJson({ preview, replayed: r });
        else if (r.duplicate) out(`dead letter ${seq} was replayed to ${r.subject} a moment ago (within the stream's duplicate window): JetStream did not store it again (${r.stream} #${r.storedSeq})`);
        else out(`replayed dead letter ${seq} to ${r.subject}: stored as ${r.stream} #${r.storedSeq}`);
        return 0;
      });
    }),
  );
}

/** What a replay would publish, line by line (the preview `triad dlq replay` prints before it asks). */
function previewLines(d: StoredDeadLetter): string[] {
  const lines = [`dead letter ${d.seq} (written on ${d.dlqSubject}, source ${d.source}): ${truncate(d.reason, 300)}`];
  if (d.writer.warning) lines.push(`warning: ${d.writer.warning}`);
  if (!d.replay.ok) return lines;
  const r = d.replay;
  lines.push(
    'a replay publishes, with JetStream:',
    keyValues([
      ['  subject', r.subject],
      ['  stream', r.stream],
      ['  message id', r.msgId],
      ['  headers', Object.keys(r.headers).length === 0 ? '(none)' : Object.entries(r.headers).map(([k, v]) => `${k}: ${v}`).join('; ')],
      ['  body', originalText(d)],
    ]),
  );
  return lines;
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}


/** The original as one line: its msgpack value as JSON, or a byte preview. */
function originalText(d: StoredDeadLetter): string {
  const o = d.original;
  if (o.format === 'msgpack') return `${o.bytes} bytes, msgpack: ${truncate(JSON.stringify(o.value) ?? 'undefined', 400)}`;
  return `${o.bytes} bytes, not msgpack (${truncate(o.error, 120)}): hex ${o.hex.slice(0, 128)}${o.truncated || o.hex.length > 128 ? '…' : ''} base64 ${o.base64.slice(0, 96)}${o.truncated || o.base64.length > 96 ? '…' : ''}`;
}
