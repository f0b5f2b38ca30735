// Proves definition validation lists every problem at once, applies defaults, matches the builder, and that plans, canonical JSON and idempotency keys are built right.
import { describe, expect, it } from 'vitest';
import { ErrorCode, LadderSchema, TriadError, isTriadError, type WorkflowDefinition } from '@triad/protocol';
import { canonicalJson, compilePlan, definitionProblems, idempotencyKey, validateDefinition, workflow } from '../src/index.js';

function invalid(raw: unknown, options?: Parameters<typeof validateDefinition>[1]): TriadError {
  try {
    validateDefinition(raw, options);
  } catch (e) {
    expect(e).toBeInstanceOf(TriadError);
    expect(isTriadError(e, ErrorCode.InvalidDefinition)).toBe(true);
    const err = e as TriadError;
    // The message carries the count and every problem; details carry them one by one.
    expect(err.message).toContain(`(${err.details.length} problem`);
    for (const d of err.details) expect(err.message).toContain(d);
    return err;
  }
  throw new Error('expected validateDefinition to throw');
}

/** The path of the cycle problem, checked to be a real closed path along dependsOn edges (in one direction). */
function cyclePath(details: readonly string[], deps: Record<string, string[]>): string[] {
  const line = details.find((d) => d.startsWith('dependency cycle: '));
  expect(line, 'a "dependency cycle" problem').toBeDefined();
  const path = (line as string).slice('dependency cycle: '.length).split(' -> ');
  expect(path[0]).toBe(path[path.length - 1]);
  const edge = (from: string, to: string) => (deps[from] ?? []).includes(to);
  const pairs = path.slice(1).map((to, i) => [path[i] as string, to] as const);
  const forward = pairs.every(([a, b]) => edge(a, b));
  const backward = pairs.every(([a, b]) => edge(b, a));
  expect(forward || backward, `"${path.join(' -> ')}" follows dependsOn edges`).toBe(true);
  return path;
}

describe('validateDefinition lists every problem at once', () => {
  const knownAgents = new Set(['inventory', 'payment']);
  const problemSteps = [
    { name: 'a', agent: 'inventory' },
    { name: 'a', agent: 'inventory' }, // duplicate
    { name: 'b', agent: 'payment', dependsOn: ['ghost'] }, // unknown dependency
    { name: 'c', agent: 'payment', dependsOn: ['c'] }, // self dependency
    { name: 'n', agent: 'inventory', dependsOn: ['a'], needs: ['b'] }, // needs outside its ancestors
    { name: 'r', agent: 'inventory', retry: { maxAttempts: 3, initialDelayMs: 2_000, maxDelayMs: 1_000 } },
    { name: 'l', agent: 'inventory', ladder: { retries: 5, longBackoffMs: 1_000, maxFailures: 2 } },
    { name: 'u', agent: 'mystery', compensate: { agent: 'undoer' } }, // unknown agents
  ];
  const cycleSteps = [
    { name: 'x', agent: 'inventory', dependsOn: ['z'] },
    { name: 'y', agent: 'inventory', dependsOn: ['x'] },
    { name: 'z', agent: 'inventory', dependsOn: ['y'] },
  ];
  const expectedWithoutCycle = [
    'step "a" is defined more than once',
    'step "b" depends on unknown step "ghost"',
    'step "c" depends on itself',
    'step "n" needs the output of "b" but does not depend on it (add it to dependsOn)',
    'step "r": retry.initialDelayMs (2000) is above retry.maxDelayMs (1000)',
    'step "l": ladder.retries (5) is above ladder.maxFailures (2)',
    'step "u" uses agent "mystery", which is not known',
    'compensation of step "u" uses agent "undoer", which is not known',
  ];

  it('every graph and policy problem of one document, in one error', () => {
    const err = invalid({ name: 'everything', steps: problemSteps }, { knownAgents });
    expect(err.message).toContain('workflow "everything" is invalid (8 problems)');
    expect([...err.details].sort()).toEqual([...expectedWithoutCycle].sort());
  });

  it('a cycle is reported with its path', () => {
    const err = invalid({ name: 'loop', steps: [{ name: 'start', agent: 'inventory' }, ...cycleSteps] });
    expect(err.details).toHaveLength(1);
    const path = cyclePath(err.details, { x: ['z'], y: ['x'], z: ['y'] });
    expect(path).toHaveLength(4);
    expect(new Set(path)).toEqual(new Set(['x', 'y', 'z']));
  });

  // The module promises every problem at once "so an author fixes them in one go": a cycle elsewhere in
  // the graph must not hide the needs problems of steps outside it. Documents the intended behaviour.
  it('a cycle does not hide the other problems (needs outside ancestors, needs of unknown steps)', () => {
    const steps = [...problemSteps, ...cycleSteps, { name: 'm', agent: 'inventory', needs: ['nowhere'] }];
    const err = invalid({ name: 'everything', steps }, { knownAgents });
    cyclePath(err.details, { x: ['z'], y: ['x'], z: ['y'] });
    for (const p of expectedWithoutCycle) expect(err.details).toContain(p);
    expect(err.details).toContain('step "m" needs unknown step "nowhere"');
    expect(err.details).toHaveLength(expectedWithoutCycle.length + 2);
  });

  it('a shape error (bad budget) and a graph error (unknown dependency) come together', () => {
    const err = invalid({
      name: 'shape',
      steps: [
        { name: 'a', agent: 'inventory', budgetMs: 0 },
        { name: 'b', agent: 'payment', dependsOn: ['nope'] },
      ],
    });
    expect(err.details).toHaveLength(2);
    expect(err.details.some((d) => d.startsWith('steps.0.budgetMs:') && d.includes('budgetMs must be at least 1 ms'))).toBe(true);
    expect(err.details).toContain('step "b" depends on unknown step "nope"');
    expect(err.message).toContain('workflow "shape" is invalid (2 problems)');
  });

  // Same promise as above: a shape error elsewhere must not hide a step's retry or ladder problem
  // (the loose graph read from a document that fails the shape check keeps no retry/ladder).
  it('a shape error (bad budget) does not hide retry and ladder problems', () => {
    const err = invalid({
      name: 'shape2',
      steps: [
        { name: 'a', agent: 'x', budgetMs: 0 },
        { name: 'b', agent: 'x', retry: { initialDelayMs: 2_000, maxDelayMs: 1_000 }, ladder: { retries: 9, maxFailures: 2 } },
      ],
    });
    expect(err.details.some((d) => d.startsWith('steps.0.budgetMs:'))).toBe(true);
    expect(err.details).toContain('step "b": retry.initialDelayMs (2000) is above retry.maxDelayMs (1000)');
    expect(err.details).toContain('step "b": ladder.retries (9) is above ladder.maxFailures (2)');
    expect(err.details).toHaveLength(3);
  });

  it('needs must be a (transitive) ancestor; a transitive one is fine', () => {
    const ok = validateDefinition({
      name: 'chain',
      steps: [
        { name: 'a', agent: 'x' },
        { name: 'b', agent: 'x', dependsOn: ['a'] },
        { name: 'c', agent: 'x', dependsOn: ['b'], needs: ['a', 'b'] },
      ],
    });
    expect(ok.steps[2]?.needs).toEqual(['a', 'b']);
    const err = invalid({ name: 'chain', steps: [{ name: 'a', agent: 'x' }, { name: 'b', agent: 'x', needs: ['a'] }] });
    expect(err.details).toEqual(['step "b" needs the output of "a" but does not depend on it (add it to dependsOn)']);
  });

  it('retry and ladder problems also come from the workflow defaults', () => {
    const err = invalid({
      name: 'defaults',
      defaults: { retry: { initialDelayMs: 9_000, maxDelayMs: 10 }, ladder: { retries: 9, maxFailures: 3 } },
      steps: [{ name: 'a', agent: 'x' }, { name: 'b', agent: 'x', retry: { initialDelayMs: 1, maxDelayMs: 2 }, ladder: { retries: 0, maxFailures: 1 } }],
    });
    expect(err.details).toEqual([
      'step "a": retry.initialDelayMs (9000) is above retry.maxDelayMs (10)',
      'step "a": ladder.retries (9) is above ladder.maxFailures (3)',
    ]);
  });

  it('knownAgents is only checked when given', () => {
    const doc = { name: 'w', steps: [{ name: 'a', agent: 'mystery' }] };
    expect(() => validateDefinition(doc)).not.toThrow();
    expect(invalid(doc, { knownAgents: new Set(['other']) }).details).toEqual(['step "a" uses agent "mystery", which is not known']);
  });

  it('definitionProblems returns [] for a valid definition', () => {
    const def = validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x' }] });
    expect(definitionProblems(def)).toEqual([]);
  });
});

describe('a valid definition', () => {
  const fanOut = {
    name: 'orders',
    steps: [
      { name: 'reserve', agent: 'inventory', budgetMs: 5_000 },
      { name: 'charge', agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'] },
      { name: 'label', agent: 'shipping', dependsOn: ['reserve'] },
      { name: 'ship', agent: 'shipping', dependsOn: ['charge', 'label'], needs: ['reserve', 'charge', 'label'] },
    ],
  };

  it('a fan-out/fan-in DAG passes with its known agents', () => {
    const def = validateDefinition(fanOut, { knownAgents: new Set(['inventory', 'payment', 'shipping']) });
    expect(def.steps.map((s) => s.name)).toEqual(['reserve', 'charge', 'label', 'ship']);
  });

  it('gets the defaults: budgetMs 10000, onFailure error, empty dependsOn/needs and defaults', () => {
    const def = validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x' }] });
    expect(def).toEqual({ name: 'w', onFailure: 'error', defaults: {}, steps: [{ name: 'a', agent: 'x', budgetMs: 10_000, dependsOn: [], needs: [] }] });
    const fan = validateDefinition(fanOut);
    expect(fan.steps[0]?.budgetMs).toBe(5_000);
    expect(fan.steps[1]?.budgetMs).toBe(10_000);
    expect(fan.onFailure).toBe('error');
    // A partial retry policy is completed with its own defaults.
    const r = validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', retry: { maxAttempts: 5 } }] });
    expect(r.steps[0]?.retry).toEqual({ maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 5_000 });
  });
});

describe('the builder', () => {
  it('produces the same document as the equivalent JSON', () => {
    const json = {
      name: 'orders',
      version: 2,
      description: 'reserve, charge, label, ship',
      onFailure: 'compensate',
      defaults: { retry: { maxAttempts: 4, initialDelayMs: 50, maxDelayMs: 1_000 }, ladder: { retries: 1, longBackoffMs: 60_000, maxFailures: 4 } },
      steps: [
        { name: 'reserve', agent: 'inventory', budgetMs: 5_000, compensate: { agent: 'inventory', budgetMs: 2_000 } },
        { name: 'charge', agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'] },
        { name: 'label', agent: 'shipping', dependsOn: ['reserve'] },
        { name: 'ship', agent: 'shipping', dependsOn: ['charge', 'label'], needs: ['charge'] },
      ],
    };
    const built = workflow('orders')
      .version(2)
      .description('reserve, charge, label, ship')
      .onFailure('compensate')
      .defaults({ retry: { maxAttempts: 4, initialDelayMs: 50, maxDelayMs: 1_000 }, ladder: { retries: 1, longBackoffMs: 60_000, maxFailures: 4 } })
      .step('reserve', { agent: 'inventory', budgetMs: 5_000, compensate: { agent: 'inventory', budgetMs: 2_000 } })
      .step('charge', { agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'] })
      .step('label', { agent: 'shipping', dependsOn: ['reserve'] })
      .step('ship', { agent: 'shipping', dependsOn: ['charge', 'label'], needs: ['charge'] });
    expect(built.build()).toEqual(validateDefinition(json));
    expect(canonicalJson(built.build())).toBe(canonicalJson(validateDefinition(json)));
    // toJSON is a copy: changing it does not change the builder.
    const raw = built.toJSON();
    (raw.steps as unknown[]).pop();
    expect(built.build().steps).toHaveLength(4);
  });

  it('only lets dependsOn/needs name earlier steps (types), and build() validates at run time', () => {
    const b = workflow('typed').step('first', { agent: 'x' });
    const later = () =>
      // @ts-expect-error 'second' is not a step added before this one
      b.step('third', { agent: 'x', dependsOn: ['second'] }).build();
    expect(later).toThrow(/depends on unknown step "second"/);
    const needsLater = () =>
      // @ts-expect-error needs may only name earlier steps too
      workflow('typed2').step('a', { agent: 'x', needs: ['b'] }).step('b', { agent: 'x' }).build();
    expect(needsLater).toThrow(TriadError);
  });

  it('build() throws INVALID_DEFINITION with knownAgents', () => {
    const b = workflow('w').step('a', { agent: 'mystery' });
    expect(() => b.build({ knownAgents: new Set(['x']) })).toThrow(/agent "mystery", which is not known/);
  });
});

describe('canonicalJson', () => {
  it('is independent of key order at every depth, drops undefined, keeps array order', () => {
    const a = { b: 1, a: { d: [1, { y: 1, x: 2 }], c: 'two' }, u: undefined };
    const b = { a: { c: 'two', d: [1, { x: 2, y: 1 }] }, b: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"c":"two","d":[1,{"x":2,"y":1}]},"b":1}');
    expect(canonicalJson({ a: [1, 2] })).not.toBe(canonicalJson({ a: [2, 1] }));
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }));
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson('s"q')).toBe('"s\\"q"');
    // Valid JSON that parses back to the same value.
    expect(JSON.parse(canonicalJson(b))).toEqual(b);
  });

  it('gives the same form for the same definition written in a different key order', () => {
    const d1 = validateDefinition({ name: 'w', steps: [{ name: 'a', agent: 'x', budgetMs: 5 }] });
    const d2 = validateDefinition({ steps: [{ budgetMs: 5, agent: 'x', name: 'a' }], name: 'w' });
    expect(canonicalJson(d1)).toBe(canonicalJson(d2));
  });
});

describe('compilePlan', () => {
  it('carries n/a/b/d/nd/l/g, with the ladder from the step, then the defaults, then the built-in defaults', () => {
    const withDefaults = validateDefinition({
      name: 'p',
      defaults: { ladder: { retries: 2, longBackoffMs: 5_000, maxFailures: 4 } },
      steps: [
        { name: 'a', agent: 'inventory', budgetMs: 1_500, ladder: { retries: 1, longBackoffMs: 1_000, maxFailures: 3 } },
        { name: 'b', agent: 'payment', dependsOn: ['a'], needs: ['a'] },
      ],
    });
    // g, when not given, is the ladder's worst case: (m + c)·b + (max(0, m − r − 1) + c)·L.
    expect(compilePlan(withDefaults)).toEqual([
      { n: 'a', a: 'inventory', b: 1_500, d: [], nd: [], l: [1, 1_000, 3, 10], g: 13 * 1_500 + 11 * 1_000 },
      { n: 'b', a: 'payment', b: 10_000, d: ['a'], nd: ['a'], l: [2, 5_000, 4, 10], g: 14 * 10_000 + 11 * 5_000 },
    ]);
    const builtIn = LadderSchema.parse({});
    const plain = validateDefinition({ name: 'p', steps: [{ name: 'a', agent: 'x' }] });
    expect(compilePlan(plain)).toEqual([
      { n: 'a', a: 'x', b: 10_000, d: [], nd: [], l: [builtIn.retries, builtIn.longBackoffMs, builtIn.maxFailures, builtIn.maxCircuitOpen], g: 16 * 10_000 + 12 * 30_000 },
    ]);
    expect(compilePlan(plain)[0]?.l).toEqual([3, 30_000, 6, 10]);
  });

  it('carries an explicit give-up time, and the compensation its own ladder and give-up time', () => {
    const def = validateDefinition({
      name: 'p',
      steps: [
        {
          name: 'a',
          agent: 'x',
          budgetMs: 1_000,
          giveUpAfterMs: 4_000,
          ladder: { retries: 0, longBackoffMs: 100, maxFailures: 2, maxCircuitOpen: 1 },
          compensate: { agent: 'y', budgetMs: 500, giveUpAfterMs: 2_000 },
        },
      ],
    });
    expect(compilePlan(def)).toEqual([{ n: 'a', a: 'x', b: 1_000, d: [], nd: [], l: [0, 100, 2, 1], g: 4_000, c: { a: 'y', b: 500, l: [0, 100, 2, 1], g: 2_000 } }]);
  });

  it('is plain JSON and does not share arrays with the definition', () => {
    const def: WorkflowDefinition = validateDefinition({ name: 'p', steps: [{ name: 'a', agent: 'x' }, { name: 'b', agent: 'x', dependsOn: ['a'] }] });
    const plan = compilePlan(def);
    expect(JSON.parse(JSON.stringify(plan))).toEqual(plan);
    plan[1]?.d.push('zzz');
    expect(def.steps[1]?.dependsOn).toEqual(['a']);
  });
});

describe('idempotencyKey', () => {
  it('is stable across calls (attempts) and distinct for run and compensate', () => {
    expect(idempotencyKey('prod', 't-1', 'charge', 'run')).toBe(idempotencyKey('prod', 't-1', 'charge', 'run'));
    expect(idempotencyKey('prod', 't-1', 'charge', 'run')).not.toBe(idempotencyKey('prod', 't-1', 'charge', 'compensate'));
    const keys = new Set<string>();
    for (const ns of ['prod', 'staging']) for (const t of ['t-1', 't-2']) for (const s of ['reserve', 'charge']) for (const k of ['run', 'compensate'] as const) {
      keys.add(idempotencyKey(ns, t, s, k));
    }
    expect(keys.size).toBe(16);
  });

  // Task ids may contain ":" and "compensate" is a valid step name, so the plain ':'-joined form can
  // make two different (task, step, kind) share a key. Documents the promised distinctness.
  it('is distinct for every (task, step, kind), even with ":" in task ids', () => {
    expect(idempotencyKey('prod', 'order:s1', 'compensate', 'run')).not.toBe(idempotencyKey('prod', 'order', 's1', 'compensate'));
    // Fan-out elements (decision 0019 §4): one key per element and kind, none shared with a step's.
    expect(idempotencyKey('prod', 't-1', 'ship', 'run', 3)).toBe('prod/t-1/ship/3');
    expect(idempotencyKey('prod', 't-1', 'ship', 'compensate', 3)).toBe('prod/t-1/ship/3/compensate');
    const elementKeys = new Set(['run', 'compensate'].flatMap((k) => [0, 1, 10].map((i) => idempotencyKey('prod', 't-1', 'ship', k as 'run' | 'compensate', i))));
    elementKeys.add(idempotencyKey('prod', 't-1', 'ship', 'run')).add(idempotencyKey('prod', 't-1', 'ship', 'compensate'));
    expect(elementKeys.size).toBe(8);
  });
});
