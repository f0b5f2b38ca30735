// Decision 0021 §1.1: the submission's tags, each rule with its message; the query's cursor-free shapes.
import { describe, expect, it } from 'vitest';
import { SubmissionSchema, TagsSchema, TaskQuerySchema, TaskCountRequestSchema, tagProblems, validate } from '../src/index.js';

const problems = (tags: Record<string, unknown>): string[] => {
  const r = TagsSchema.safeParse(tags);
  return r.success ? [] : r.error.issues.map((i) => (i.path.length > 0 ? `tags.${i.path.join('.')}: ${i.message}` : i.message));
};

describe('tags', () => {
  it('accepts up to 16 tags of short values, and Triad may add its own triad. keys beyond them', () => {
    const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, `v${i}`]));
    expect(problems(sixteen)).toEqual([]);
    expect(problems({ customer: 'c-42', 'order.region': 'eu-west_1', x: 'é'.repeat(64) })).toEqual([]);
    expect(tagProblems({ ...sixteen, 'triad.schedule': 'nightly' }, { allowReserved: true })).toEqual([]);
  });

  it('refuses each bad tag with what is wrong', () => {
    expect(problems(Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])))).toEqual(['tags: 17 tags; at most 16']);
    expect(problems({ '1st': 'x' })).toEqual(['tags: key "1st" must start with a letter and have at most 32 letters, digits, "_", "." or "-"']);
    expect(problems({ ['k'.repeat(33)]: 'x' })[0]).toMatch(/must start with a letter and have at most 32/);
    expect(problems({ 'triad.x': '1' })).toEqual(['tags: key "triad.x" is reserved for Triad']);
    expect(problems({ customer: 'x'.repeat(140) })).toEqual(['tags.customer: the value is 140 bytes; at most 128']);
    expect(problems({ customer: 'é'.repeat(65) })).toEqual(['tags.customer: the value is 130 bytes; at most 128']);
    expect(problems({ customer: '' })).toEqual(['tags.customer: the value is empty; at least 1 byte']);
    expect(problems({ customer: 'a\u001fb' })).toEqual(['tags.customer: the value must not contain control characters']);
    expect(problems({ customer: 'a\u007f' })).toEqual(['tags.customer: the value must not contain control characters']);
  });

  it('a submission with a bad tag is invalid, naming the field', () => {
    const v = validate({ taskId: 't1', workflow: 'orders', submittedAt: 1, tags: { customer: 'x'.repeat(129) } }, SubmissionSchema, 'submission');
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.error.message).toMatch(/tags\.customer: the value is 129 bytes; at most 128/);
    expect(validate({ taskId: 't1', workflow: 'orders', submittedAt: 1, tags: { customer: 'c-42' } }, SubmissionSchema, 'submission').ok).toBe(true);
  });

  it('a query takes the filters and a page size of at most 1000; a count takes no cursor', () => {
    expect(TaskQuerySchema.parse({ tags: { customer: 'c-42' }, status: 'failed' })).toMatchObject({ limit: 50 });
    expect(TaskQuerySchema.safeParse({ limit: 1001 }).success).toBe(false);
    expect(TaskQuerySchema.safeParse({ status: 'lost' }).success).toBe(false);
    expect(TaskCountRequestSchema.parse({ cursor: 'x', workflow: 'orders' })).toEqual({ workflow: 'orders' });
  });
});
