/**
 * Bulk operations' records (decision 0021 §2.2), in the namespace's `{<ns>:ops}` slot: created or resumed
 * by startOp.lua, advanced by checkpointOp.lua (a repeated batch is a no-op), ended by endOp.lua; each
 * write renews the record's expiry (the retention). Acting once per task is not this record's job: the
 * fence is in each task (cancelTask/retryStep with the operation's id).
 */
import { ErrorCode, TriadError, type BulkOp } from '@triad/protocol';
import type { RedisClient } from './client.js';
import { ScriptCode, scriptError } from './codes.js';
import { keys, type Keys } from './keys.js';
import { runScript } from './scripts.js';

export interface StartOpArgs {
  id: string;
  action: 'cancel' | 'retry';
  /** Canonical JSON of the filter: a resume must name the same. */
  filter: string;
  step?: string;
  reason?: string;
  asOf: number;
  by: string;
  matched: number;
  now: number;
}

export interface OpCounts {
  acted: number;
  already: number;
  skipped: number;
  missing: number;
  failed: number;
}

const NUMBERS = ['asOf', 'createdAt', 'updatedAt', 'matched', 'batch', 'acted', 'already', 'skipped', 'missing', 'failed'] as const;

/** The record as the scripts return it (every field a string) → the wire's BulkOp. */
function parseOp(raw: unknown): BulkOp {
  const r = JSON.parse(Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw)) as Record<string, string>;
  const op: Record<string, unknown> = { id: r['id'], action: r['action'], filter: JSON.parse(r['filter'] ?? '{}') as unknown, by: r['by'] ?? '', state: r['state'] };
  for (const n of NUMBERS) op[n] = Number(r[n] ?? 0);
  if (r['step']) op['step'] = r['step'];
  if (r['reason']) op['reason'] = r['reason'];
  if (r['cursor']) op['cursor'] = r['cursor'];
  return op as BulkOp;
}

export class OpStore {
  private readonly keys: Keys;

  constructor(
    private readonly redis: RedisClient,
    namespace: string,
    /** How long a record is kept after its last write (TRIAD_RETENTION_MS's default: 7 days). */
    private readonly retentionMs = 7 * 86_400_000,
  ) {
    this.keys = keys(namespace);
  }

  async start(a: StartOpArgs): Promise<{ op: BulkOp; resumed: boolean }> {
    const reply = (await runScript(
      this.redis,
      'startOp',
      [this.keys.op(a.id), this.keys.ops],
      [a.id, a.action, a.filter, a.step ?? '', a.reason ?? '', a.asOf, a.by, a.matched, a.now, this.retentionMs, this.keys.opPrefix],
    )) as unknown[];
    const code = Number(reply[0]);
    if (code !== ScriptCode.Ok) throw scriptError(code, `bulk operation ${a.id}`, (JSON.parse(String(reply[1])) as { reason?: string }).reason);
    return { op: parseOp(reply[1]), resumed: String(reply[2]) === 'resumed' };
  }

  async checkpoint(id: string, batch: number, cursor: string | undefined, c: OpCounts, now: number): Promise<BulkOp> {
    const reply = (await runScript(this.redis, 'checkpointOp', [this.keys.op(id)], [batch, cursor ?? '', c.acted, c.already, c.skipped, c.missing, c.failed, now, this.retentionMs])) as unknown[];
    return this.parsed(reply, id);
  }

  async end(id: string, state: 'done' | 'stopped', now: number): Promise<BulkOp> {
    const reply = (await runScript(this.redis, 'endOp', [this.keys.op(id)], [state, now, this.retentionMs])) as unknown[];
    return this.parsed(reply, id);
  }

  async get(id: string): Promise<BulkOp | undefined> {
    const h = await this.redis.hgetall(this.keys.op(id));
    if (!h['id']) return undefined;
    return parseOp(JSON.stringify(h));
  }

  /** The most recent operations, newest first. */
  async list(limit: number): Promise<BulkOp[]> {
    const ids = await this.redis.zrevrange(this.keys.ops, 0, limit - 1);
    const ops = await Promise.all(ids.map((id) => this.get(id)));
    return ops.filter((o): o is BulkOp => o !== undefined);
  }

  private parsed(reply: unknown[], id: string): BulkOp {
    const code = Number(reply[0]);
    if (code === ScriptCode.UnknownTask) throw unknownOp(id);
    if (code !== ScriptCode.Ok) throw scriptError(code, `bulk operation ${id}`);
    return parseOp(reply[1]);
  }
}

export function unknownOp(id: string): TriadError {
  return new TriadError(ErrorCode.InvalidState, `no bulk operation ${id}: it never started, or its record expired with the retention; start a new one (triad ops lists the recent ones)`);
}
