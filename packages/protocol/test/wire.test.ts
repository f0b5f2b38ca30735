// Protocol v1's encoding rules (docs/protocol.md): integers as msgpack integers whatever their size, a
// msgpack timestamp read as epoch milliseconds, nil for an optional field read as absent, unknown fields
// ignored, an unknown extension type refused with the reason.
import { describe, expect, it } from 'vitest';
import { Packr, addExtension } from 'msgpackr';
import { StepRequestSchema, StepResultSchema, SubmissionSchema, decode, encode, integersAsIntegers } from '../src/index.js';

const raw = new Packr({ useRecords: false, int64AsType: 'number' });

describe('integers are integers', () => {
  it('writes integers beyond 32 bits as msgpack int64, small ones compactly, fractions as floats', () => {
    const at = 1_795_401_586_717;
    const bytes = encode({ at });
    // fixmap(1) "at" int64
    expect(Buffer.from(bytes).subarray(4, 5).toString('hex')).toBe('d3');
    expect(Buffer.from(encode({ n: -5_000_000_000 })).includes(0xd3)).toBe(true);
    expect(Buffer.from(encode({ n: 4_000_000_000 })).subarray(3, 4).toString('hex')).toBe('ce'); // uint32 still fits
    expect(Buffer.from(encode({ f: 1.5 })).subarray(3, 4).toString('hex')).toBe('cb');
    expect(raw.unpack(bytes)).toEqual({ at });
  });

  it('copies only the containers it changes, and leaves binary data alone', () => {
    const bin = new Uint8Array([1, 2, 3]);
    const small = { a: 1, b: [2, 3], c: bin };
    expect(integersAsIntegers(small)).toBe(small);
    const mixed = { keep: { x: 1 }, change: { at: 1_795_401_586_717 } };
    const out = integersAsIntegers(mixed) as typeof mixed;
    expect(out).not.toBe(mixed);
    expect(out.keep).toBe(mixed.keep);
    expect(out.change.at).toBe(1_795_401_586_717n);
    expect(mixed.change.at).toBe(1_795_401_586_717);
  });
});

describe('what a reader accepts within v1', () => {
  const submission = { taskId: 't-1', workflow: 'orders', input: { a: 1 }, submittedAt: 1_795_401_586_717 };

  it('ignores a field it does not know (a newer writer), and keeps validating the ones it knows', () => {
    const d = decode(raw.pack({ ...submission, urgency: 'high', traceState: { x: 1 } }), SubmissionSchema, 'submission');
    expect(d.ok && d.value).toEqual(submission);
    const bad = decode(raw.pack({ ...submission, urgency: 'high', submittedAt: 'yesterday' }), SubmissionSchema, 'submission');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error.message).toMatch(/submittedAt/);
  });

  it('reads a priority of 1–5 and refuses any other, saying what it expects (decision 0020)', () => {
    const d = decode(raw.pack({ ...submission, priority: 1 }), SubmissionSchema, 'submission');
    expect(d.ok && d.value).toEqual({ ...submission, priority: 1 });
    for (const p of [0, 6, 2.5, 'high']) {
      const bad = decode(raw.pack({ ...submission, priority: p }), SubmissionSchema, 'submission');
      expect(bad.ok).toBe(false);
      if (!bad.ok) expect(bad.error.message).toContain(`priority: expected a whole number from 1 (highest) to 5 (lowest), got ${JSON.stringify(p)}`);
    }
  });

  it('reads a throttled result (decision 0020 §5)', () => {
    const result = { taskId: 't-1', step: 'charge', kind: 'run', attempt: 1, agentId: 'a1', finishedAt: 1, tries: 1, ok: false, error: { message: 'slow down', retryable: true, throttled: true, retryAfterMs: 2_000, effect: 'none' } };
    const d = decode(raw.pack(result), StepResultSchema, 'step result');
    expect(d.ok && d.value).toEqual(result);
  });

  it('reads nil for an optional field as absent', () => {
    const d = decode(raw.pack({ ...submission, version: null, replyTo: null }), SubmissionSchema, 'submission');
    expect(d.ok).toBe(true);
    if (d.ok) {
      expect(d.value.version).toBeUndefined();
      expect(d.value.replyTo).toBeUndefined();
    }
  });

  it('reads an older writer\'s message without a later optional field (a result with no effect, a compensation with none)', () => {
    const result = { taskId: 't-1', step: 's', kind: 'run', attempt: 1, agentId: 'a', finishedAt: 1, tries: 2, ok: false, error: { message: 'x', retryable: true } };
    const r = decode(raw.pack(result), StepResultSchema, 'step result');
    expect(r.ok && !r.value.ok && r.value.error.effect).toBeUndefined();
    const req = { taskId: 't-1', workflow: 'w', version: 1, step: 's', agent: 'a', kind: 'compensate', attempt: 1, idempotencyKey: 'k', undoes: 'k0', completeBy: 5, needs: {}, dispatchedAt: 1 };
    expect(decode(raw.pack(req), StepRequestSchema, 'step request').ok).toBe(true);
  });

  it('reads a msgpack timestamp as epoch milliseconds (a Go time.Time)', () => {
    const at = new Date(1_795_401_586_717);
    const d = decode(raw.pack({ ...submission, submittedAt: at }), SubmissionSchema, 'submission');
    expect(d.ok && d.value.submittedAt).toBe(1_795_401_586_717);
  });

  it('refuses a message with an unknown extension type, saying why', () => {
    class Opaque {
      constructor(readonly v: number) {}
    }
    addExtension({ Class: Opaque, type: 66, write: (o: Opaque) => o.v, read: (v: number) => new Opaque(v) });
    const bytes = new Packr({ useRecords: false }).pack({ ...submission, input: new Opaque(1) });
    // A reader that does not know type 66: a fresh process (simulated by decoding the raw bytes with the ext byte changed).
    const foreign = Buffer.from(bytes);
    const at = foreign.indexOf(66);
    foreign[at] = 67;
    const d = decode(foreign, SubmissionSchema, 'submission');
    expect(d.ok).toBe(false);
    if (!d.ok) expect(d.error.message).toMatch(/submission is not valid msgpack \(.*extension/i);
  });
});
