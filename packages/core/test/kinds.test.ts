// Decision 0019 §1 (increment 1): steps that wait and branch in the definition model — every validation
// rule of §1.5 with its message (one per problem, all at once, never a zod union dump), the plan fields
// of §1.8 (a plain agent step compiles to exactly the bytes it always did), the builder ≡ the JSON of
// docs/decisions/0019-example.workflow.json, and the features a scheduler refuses until they are built.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCode, TriadError, WorkflowDefinitionSchema } from '@triad/protocol';
import { canonicalJson, compilePlan, definitionProblems, stepFeatures, stepKind, unsupportedFeatures, validateDefinition, workflow } from '../src/index.js';

const root = new URL('../../../', import.meta.url);
const readJson = (path: string): unknown => JSON.parse(readFileSync(new URL(path, root), 'utf8'));

function problems(raw: unknown): string[] {
  try {
    validateDefinition(raw);
  } catch (e) {
    expect(e).toBeInstanceOf(TriadError);
    const err = e as TriadError;
    expect(err.code).toBe(ErrorCode.InvalidDefinition);
    // Every problem is in the message, none is zod's union dump.
    for (const d of err.details) expect(err.message).toContain(d);
    for (const d of err.details) expect(d).not.toMatch(/Invalid input/);
    return [...err.details];
  }
  throw new Error('expected validateDefinition to throw');
}

const wf = (...steps: unknown[]): unknown => ({ name: 'orders', steps });
/** The example's orders workflow as it was before its approval step and its fan-out (decision 0019): plain agent steps only. */
function plainOrders(): { steps: { name: string; dependsOn?: string[] }[] } {
  const doc = readJson('apps/example-orders/orders.workflow.json') as { steps: { name: string; dependsOn?: string[]; forEach?: unknown; maxParallel?: number; maxItems?: number }[] };
  doc.steps = doc.steps
    .filter((x) => x.name !== 'approval')
    .map(({ forEach: _forEach, maxParallel: _maxParallel, maxItems: _maxItems, ...x }) => (x.name === 'charge' ? { ...x, dependsOn: ['reserve', 'fraud'] } : x));
  return doc;
}

describe('one kind per step (0019 §1.5)', () => {
  it('a step does exactly one thing', () => {
    expect(problems(wf({ name: 'x', agent: 'a', sleep: { ms: 5 } }))).toEqual([
      'step "x" must do one thing: call an agent ("agent"), sleep ("sleep"), wait for a signal ("waitFor") or start a child task ("child"); it has agent and sleep',
    ]);
    expect(problems(wf({ name: 'x', sleep: { ms: 5 }, agent: 'a' }))[0]).toMatch(/; it has sleep and agent$/);
    expect(problems(wf({ name: 'x' }))).toEqual([
      'step "x" must do one thing: call an agent ("agent"), sleep ("sleep"), wait for a signal ("waitFor") or start a child task ("child"); it has none',
    ]);
    expect(problems(wf({ name: 'x', waitFor: { signal: 's', timeoutMs: 5 }, child: { workflow: 'other' }, sleep: { ms: 1 } }))[0]).toMatch(/; it has waitFor, child and sleep$/);
  });

  it('forEach, maxItems and maxParallel belong to agent calls', () => {
    expect(problems(wf({ name: 'x', sleep: { ms: 5 }, forEach: 'items' }))).toEqual(['step "x": forEach runs an agent once per element: add "agent"']);
    expect(problems(wf({ name: 'x', agent: 'a', maxParallel: 2 }))).toEqual(['step "x": maxParallel and maxItems apply only with forEach']);
    expect(problems(wf({ name: 'x', agent: 'a', maxItems: 2 }))).toEqual(['step "x": maxParallel and maxItems apply only with forEach']);
    expect(problems(wf({ name: 'x', agent: 'a', forEach: 'items', maxItems: 10, maxParallel: 20 }))).toEqual(['step "x": maxParallel (20) is above maxItems (10)']);
    expect(problems(wf({ name: 'x', agent: 'a', forEach: 'items', maxParallel: 200 }))).toEqual(['step "x": maxParallel (200) is above maxItems (100, the default)']);
    // The documented cap: at most 1000 items.
    expect(problems(wf({ name: 'x', agent: 'a', forEach: 'items', maxItems: 1001 }))).toEqual(['steps.0.maxItems: Too big: expected number to be <=1000']);
  });

  it("an agent's fields on a sleep, a wait or a child step: one problem per field, naming the kind", () => {
    expect(problems(wf({ name: 'approval', waitFor: { signal: 'approved', timeoutMs: 60_000 }, compensate: { agent: 'x' } }))).toEqual([
      'step "approval" waits for a signal: "compensate" does not apply to it (a wait has no effect to undo); remove it',
    ]);
    const all = problems(
      wf(
        { name: 'a', agent: 'x' },
        { name: 'nap', sleep: { ms: 5 }, dependsOn: ['a'], budgetMs: 5, retry: { maxAttempts: 2 }, ladder: { retries: 1 }, giveUpAfterMs: 9, compensate: { agent: 'x' }, needs: ['a'] },
      ),
    );
    expect(all).toEqual([
      'step "nap" sleeps: "budgetMs" does not apply to it (only an agent call has a complete-by budget); remove it',
      'step "nap" sleeps: "retry" does not apply to it (only an agent call is retried); remove it',
      'step "nap" sleeps: "ladder" does not apply to it (only an agent call climbs the supervisor\'s failure ladder); remove it',
      'step "nap" sleeps: "giveUpAfterMs" does not apply to it (a sleep ends at its time); remove it',
      'step "nap" sleeps: "compensate" does not apply to it (a sleep has no effect to undo); remove it',
      'step "nap" sleeps: "needs" does not apply to it (only an agent\'s request carries outputs; a condition or a child input reads them directly); remove it',
    ]);
    expect(problems(wf({ name: 'ship-all', child: { workflow: 'shipment' }, compensate: { agent: 'x' } }))).toEqual([
      'step "ship-all" starts a child task: "compensate" does not apply to it (a child task is undone by its own workflow\'s compensations); remove it',
    ]);
    // definitionProblems on a parsed definition sees the same rules (but budgetMs, which zod defaulted).
    const def = WorkflowDefinitionSchema.parse(wf({ name: 'w', waitFor: { signal: 's', timeoutMs: 5 }, retry: {} }));
    expect(definitionProblems(def)).toEqual(['step "w" waits for a signal: "retry" does not apply to it (only an agent call is retried); remove it']);
  });

  it('a sleep takes either ms or untilInput', () => {
    expect(problems(wf({ name: 'x', sleep: { ms: 5, untilInput: 'at' } }))).toEqual(['step "x": sleep takes either ms or untilInput']);
    expect(problems(wf({ name: 'x', sleep: {} }))).toEqual(['step "x": sleep takes either ms or untilInput']);
    expect(problems(wf({ name: 'x', sleep: { ms: 0 } }))).toEqual(['step "x": sleep.ms must be at least 1 ms']);
    expect(problems(wf({ name: 'x', sleep: { untilInput: 'remind at' } }))[0]).toMatch(/^step "x": sleep\.untilInput: a path is 1-8 segments/);
    expect(problems(wf({ name: 'x', sleep: 5 }))).toEqual(['step "x": sleep must be { "ms": <ms> } or { "untilInput": "<path>", "maxMs"?: <ms> }']);
    // The longest sleep is 30 days.
    expect(problems(wf({ name: 'x', sleep: { ms: 31 * 86_400_000 } }))).toEqual(['step "x": sleep.ms must be at most 2592000000 ms']);
  });

  it('a workflow cannot start itself', () => {
    expect(problems(wf({ name: 'again', child: { workflow: 'orders' } }))).toEqual(['step "again" starts workflow "orders", which is this workflow: a workflow cannot start itself']);
  });

  it('waitFor and child are checked field by field', () => {
    expect(problems(wf({ name: 'x', waitFor: { signal: 'bad name', timeoutMs: 0 } }))).toEqual([
      'steps.0.waitFor.signal: a name starts with a letter and has at most 64 letters, digits, "_" or "-"',
      'steps.0.waitFor.timeoutMs: waitFor.timeoutMs must be at least 1 ms',
    ]);
    expect(problems(wf({ name: 'x', child: { workflow: 'other', input: 'a b', extra: 1 } }))).toEqual([
      'steps.0.child: Unrecognized key: "extra"',
      'step "x": child.input "a b" is not a path: 1-8 segments separated by "." (e.g. "items", "order.items")',
    ]);
  });
});

describe('references to outputs (0019 §1.3)', () => {
  it('a condition, a list or a child input may read only a step it depends on', () => {
    const got = problems(
      wf(
        { name: 'score', agent: 'x' },
        { name: 'other', agent: 'x' },
        { name: 'check', agent: 'x', dependsOn: ['other'], when: { any: [{ output: 'score.risk', gte: 0.7 }, { output: 'ghost', exists: true }] } },
        { name: 'ship', agent: 'x', dependsOn: ['other'], forEach: { output: 'score.items' } },
        { name: 'kid', child: { workflow: 'shipment', input: { output: 'nowhere.x' } } },
      ),
    );
    expect(got).toEqual([
      'step "check": when refers to the output of "score", which it does not depend on (add it to dependsOn)',
      'step "check": when refers to the output of "ghost", which is not a step',
      'step "ship": forEach refers to the output of "score", which it does not depend on (add it to dependsOn)',
      'step "kid": child.input refers to the output of "nowhere", which is not a step',
    ]);
    // Transitively is enough; needs is not required (the transition reads it, no request carries it).
    expect(() =>
      validateDefinition(wf({ name: 'score', agent: 'x' }, { name: 'mid', agent: 'x', dependsOn: ['score'] }, { name: 'check', agent: 'x', dependsOn: ['mid'], when: { output: 'score.risk', gte: 0.7 } })),
    ).not.toThrow();
  });
});

describe('conditions (0019 §1.4–1.5)', () => {
  it('a condition names one source and one operator: one message per problem, where it is', () => {
    expect(problems(wf({ name: 'x', agent: 'a', when: { any: [{ input: 'a', eq: 1 }, { gt: 1, lt: 2 }] } }))).toEqual([
      'step "x": when.any[1] must name one of input or output, and exactly one of eq ne gt gte lt lte in exists (it has gt and lt)',
    ]);
    expect(problems(wf({ name: 'x', agent: 'a', when: { input: 'a', output: 'b', exists: true } }))).toEqual([
      'step "x": when must name one of input or output, and exactly one of eq ne gt gte lt lte in exists (it has input, output and exists)',
    ]);
    expect(problems(wf({ name: 'x', agent: 'a', when: {} }))).toEqual(['step "x": when must name one of input or output, and exactly one of eq ne gt gte lt lte in exists (it has none)']);
  });

  it('operands, paths and lists are checked, every one of them', () => {
    const got = problems(
      wf({
        name: 'x',
        agent: 'a',
        when: {
          all: [
            { input: 'a', eq: { nested: 1 } },
            { input: 'a', gt: true },
            { input: 'a', in: [] },
            { input: 'a', exists: 'yes' },
            { input: 'a b', eq: 1 },
            { output: '9lives', eq: 1 },
            { input: 'a', eq: 1, colour: 'red' },
            { all: [], any: [{ input: 'a', eq: 1 }] },
            { any: [] },
            'amount > 1',
          ],
        },
      }),
    );
    expect(got).toEqual([
      'step "x": when.all[0].eq must be a string (at most 1000 characters), a number, true, false or null',
      'step "x": when.all[1].gt must be a number or a string (at most 1000 characters)',
      'step "x": when.all[2].in must be a list of 1 to 100 strings, numbers, booleans or nulls',
      'step "x": when.all[3].exists must be true or false',
      'step "x": when.all[4].input "a b" is not a path: 1-8 segments separated by "." (e.g. "amount", "customer.zip", "items.0.sku")',
      'step "x": when.all[5].output "9lives" is not an output reference: "<step>" or "<step>.<path>" (e.g. "score.risk")',
      'step "x": when.all[6] has "colour", which is not a condition field (input, output, eq, ne, gt, gte, lt, lte, in, exists, all, any)',
      'step "x": when.all[7] combines all with any: put each condition in the list of all',
      'step "x": when.all[8].any must be a list of 1 to 16 conditions',
      'step "x": when.all[9] must be a condition: { input | output, and one of eq ne gt gte lt lte in exists }, or { all: [...] } or { any: [...] }',
    ]);
  });

  it('at most 32 conditions and 4 levels of all/any', () => {
    const leaf = { input: 'a', eq: 1 };
    const wide = { any: [{ all: Array(16).fill(leaf) }, { all: Array(16).fill(leaf) }, { all: Array(8).fill(leaf) }] };
    expect(problems(wf({ name: 'x', agent: 'a', when: wide }))).toEqual(['step "x": when has 40 conditions; at most 32 (and 4 levels of all/any)']);
    const deep = { all: [{ any: [{ all: [{ any: [{ all: [leaf] }] }] }] }] };
    expect(problems(wf({ name: 'x', agent: 'a', when: deep }))).toEqual(['step "x": when nests all/any 5 levels deep; at most 4 (and 32 conditions)']);
    expect(() => validateDefinition(wf({ name: 'x', agent: 'a', when: deep.all[0] }))).not.toThrow();
  });

  it('a problem in a condition does not hide the others in the document', () => {
    const got = problems(wf({ name: 'a', agent: 'x', budgetMs: 0 }, { name: 'b', agent: 'x', dependsOn: ['nope'], when: { input: 'a' } }, { name: 'c', sleep: { ms: 1 }, agent: 'y' }));
    expect(got).toEqual([
      'steps.0.budgetMs: budgetMs must be at least 1 ms',
      'step "b": when must name one of input or output, and exactly one of eq ne gt gte lt lte in exists (it has input)',
      'step "c" must do one thing: call an agent ("agent"), sleep ("sleep"), wait for a signal ("waitFor") or start a child task ("child"); it has sleep and agent',
      'step "b" depends on unknown step "nope"',
    ]);
  });
});

describe('the example (docs/decisions/0019-example.workflow.json)', () => {
  const json = readJson('docs/decisions/0019-example.workflow.json') as { description: string; defaults: Record<string, unknown> };
  const built = workflow('approved-orders')
    .description(json.description)
    .onFailure('compensate')
    .defaults({ retry: { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 1_000 }, ladder: { retries: 2, longBackoffMs: 1_000, maxFailures: 4 } })
    .step('reserve', { agent: 'inventory', budgetMs: 5_000, compensate: { agent: 'inventory', budgetMs: 5_000 } })
    .sleep('cool-off', { ms: 3_000 })
    .waitFor('approval', { signal: 'approved', timeoutMs: 10_000 }, { dependsOn: ['reserve', 'cool-off'], when: { input: 'amount', gt: 1000 } })
    .step('ship', {
      agent: 'shipping',
      budgetMs: 5_000,
      dependsOn: ['approval'],
      needs: ['reserve'],
      forEach: 'items',
      maxParallel: 2,
      maxItems: 20,
      compensate: { agent: 'shipping', budgetMs: 5_000 },
    });

  it("is the builder's document, and valid", () => {
    expect(built.toJSON()).toEqual(json);
    expect(canonicalJson(built.build())).toBe(canonicalJson(validateDefinition(json)));
  });

  it('compiles to the plan fields of §1.8', () => {
    const plan = compilePlan(validateDefinition(json));
    expect(plan.map((p) => p.n)).toEqual(['reserve', 'cool-off', 'approval', 'ship']);
    expect(plan[1]).toEqual({ n: 'cool-off', k: 's', d: [], nd: [], sl: { ms: 3_000 } });
    expect(plan[2]).toEqual({ n: 'approval', k: 'w', d: ['reserve', 'cool-off'], nd: [], ws: { s: 'approved', t: 10_000 }, w: { s: '', p: ['amount'], o: 'gt', v: 1000 } });
    expect(plan[3]).toMatchObject({ n: 'ship', a: 'shipping', b: 5_000, nd: ['reserve'], fe: { s: '', p: ['items'], m: 20, x: 2 } });
    // Non-agent kinds carry no agent, budget or ladder.
    for (const p of plan.slice(1, 3)) for (const k of ['a', 'b', 'l', 'g', 'c']) expect(p).not.toHaveProperty(k);
  });
});

describe('compilePlan of the new fields', () => {
  it('a plain agent step is byte-for-byte what it always was (the orders example)', () => {
    const orders = validateDefinition(plainOrders());
    // The plan field compiled before decision 0019, byte for byte (JSON.stringify is how the store writes it).
    expect(JSON.stringify(compilePlan(orders))).toBe(
      '[{"n":"reserve","a":"inventory","b":5000,"d":[],"nd":[],"l":[3,5000,6,10],"g":140000,"c":{"a":"inventory","b":5000,"l":[3,5000,6,10],"g":140000}},' +
        '{"n":"fraud","a":"fraud","b":5000,"d":[],"nd":[],"l":[3,5000,6,10],"g":140000},' +
        '{"n":"charge","a":"payment","b":5000,"d":["reserve","fraud"],"nd":["reserve","fraud"],"l":[3,5000,6,10],"g":140000,"c":{"a":"payment","b":5000,"l":[3,5000,6,10],"g":140000}},' +
        '{"n":"ship","a":"shipping","b":5000,"d":["charge"],"nd":["reserve","charge"],"l":[3,5000,6,10],"g":140000,"c":{"a":"shipping","b":5000,"l":[3,5000,6,10],"g":140000}}]',
    );
  });

  it('sleep untilInput, child (input, version, timeout), forEach over an output, all/any conditions', () => {
    const def = validateDefinition(
      wf(
        { name: 'quote', agent: 'q' },
        { name: 'remind', sleep: { untilInput: 'remind.at' } },
        { name: 'remind2', sleep: { untilInput: 'at', maxMs: 60_000 } },
        { name: 'kid', child: { workflow: 'shipment', version: 2, input: { output: 'quote.lines' }, timeoutMs: 30_000 }, dependsOn: ['quote'] },
        { name: 'kid2', child: { workflow: 'shipment' } },
        { name: 'kid3', child: { workflow: 'shipment', input: { output: 'quote' } }, dependsOn: ['quote'] },
        { name: 'each', agent: 'e', dependsOn: ['quote'], forEach: { output: 'quote.lines' }, maxItems: 5 },
        { name: 'many', agent: 'e', forEach: { input: 'xs' } },
        {
          name: 'cond',
          agent: 'c',
          dependsOn: ['quote'],
          when: { all: [{ input: 'a', eq: null }, { any: [{ output: 'quote', exists: true }, { input: 'c.0', in: ['x', 1, false, null] }] }] },
        },
      ),
    );
    const plan = new Map(compilePlan(def).map((p) => [p.n, p]));
    expect(plan.get('remind')).toEqual({ n: 'remind', k: 's', d: [], nd: [], sl: { p: ['remind', 'at'], mx: 30 * 86_400_000 } });
    expect(plan.get('remind2')?.sl).toEqual({ p: ['at'], mx: 60_000 });
    expect(plan.get('kid')).toEqual({ n: 'kid', k: 'c', d: ['quote'], nd: [], ch: { w: 'shipment', v: 2, s: 'quote', p: ['lines'], t: 30_000 } });
    expect(plan.get('kid2')?.ch).toEqual({ w: 'shipment', s: '' });
    expect(plan.get('kid3')?.ch).toEqual({ w: 'shipment', s: 'quote' });
    expect(plan.get('each')?.fe).toEqual({ s: 'quote', p: ['lines'], m: 5, x: 5 });
    expect(plan.get('many')?.fe).toEqual({ s: '', p: ['xs'], m: 100, x: 10 });
    expect(plan.get('cond')?.w).toEqual({
      A: [
        { s: '', p: ['a'], o: 'eq', v: null },
        { O: [{ s: 'quote', p: [], o: 'exists', v: true }, { s: '', p: ['c', '0'], o: 'in', v: ['x', 1, false, null] }] },
      ],
    });
    // Plain JSON: it round-trips (null operands included).
    const all = compilePlan(def);
    expect(JSON.parse(JSON.stringify(all))).toEqual(all);
  });
});

describe('the builder for the new kinds', () => {
  it('builds sleeps, waits, children and typed references', () => {
    const b = workflow('w')
      .step('quote', { agent: 'q' })
      .sleep('remind', { untilInput: 'remindAt', maxMs: 60_000 }, { dependsOn: ['quote'] })
      .child('kid', { workflow: 'shipment', input: { output: 'quote.lines' } }, { dependsOn: ['quote'], when: { output: 'quote.total', gt: 0 } })
      .step('each', { agent: 'e', dependsOn: ['kid'], forEach: { output: 'kid.items' } });
    expect(b.toJSON().steps).toEqual([
      { name: 'quote', agent: 'q' },
      { name: 'remind', sleep: { untilInput: 'remindAt', maxMs: 60_000 }, dependsOn: ['quote'] },
      { name: 'kid', child: { workflow: 'shipment', input: { output: 'quote.lines' } }, dependsOn: ['quote'], when: { output: 'quote.total', gt: 0 } },
      { name: 'each', agent: 'e', dependsOn: ['kid'], forEach: { output: 'kid.items' } },
    ]);
    expect(() => b.build()).not.toThrow();
  });

  it('only lets output references name earlier steps (types), and build() checks the rest', () => {
    const b = workflow('typed').step('first', { agent: 'x' });
    // @ts-expect-error 'later' is not a step added before this one
    b.sleep('nap', { ms: 5 }, { when: { output: 'later.x', exists: true } });
    // @ts-expect-error the output reference must start with a known step
    b.step('each', { agent: 'x', forEach: { output: 'nobody.items' } });
    // @ts-expect-error dependsOn of a wait names only earlier steps too
    b.waitFor('ok', { signal: 'ok', timeoutMs: 5 }, { dependsOn: ['nobody'] });
    expect(() => workflow('t').step('a', { agent: 'x' }).sleep('b', { ms: 1 }, { when: { output: 'a.x', gt: 1 } }).build()).toThrow(
      /when refers to the output of "a", which it does not depend on/,
    );
  });
});

describe('features and the registration guard (0019 §10)', () => {
  const def = validateDefinition(readJson('docs/decisions/0019-example.workflow.json'));

  it('lists what each step uses beyond an agent call', () => {
    expect(stepFeatures(def)).toEqual([
      { step: 'cool-off', feature: 'sleep' },
      { step: 'approval', feature: 'when' },
      { step: 'approval', feature: 'waitFor' },
      { step: 'ship', feature: 'forEach' },
    ]);
    expect(def.steps.map(stepKind)).toEqual(['agent', 'sleep', 'waitFor', 'agent']);
  });

  it('refuses every feature a scheduler does not list, one message each', () => {
    expect(unsupportedFeatures(def, new Set())).toEqual([
      'step "cool-off" uses sleep, which this scheduler does not support yet',
      'step "approval" uses when, which this scheduler does not support yet',
      'step "approval" uses waitFor, which this scheduler does not support yet',
      'step "ship" uses forEach, which this scheduler does not support yet',
    ]);
    expect(unsupportedFeatures(def, new Set(['when', 'sleep', 'waitFor']))).toEqual(['step "ship" uses forEach, which this scheduler does not support yet']);
    expect(unsupportedFeatures(validateDefinition(plainOrders()), new Set())).toEqual([]);
    expect(unsupportedFeatures(validateDefinition(readJson('apps/example-orders/orders.workflow.json')), new Set(['sleep']))).toEqual([
      'step "approval" uses when, which this scheduler does not support yet',
      'step "approval" uses waitFor, which this scheduler does not support yet',
      'step "ship" uses forEach, which this scheduler does not support yet',
    ]);
  });
});
