// (input, next) interceptors: composed first-outermost, each sees the input and the output, and may
// change either or not call next at all.
import { describe, expect, it } from 'vitest';
import { intercept, tracer, type Interceptor } from '../src/index.js';

describe('intercept', () => {
  it('runs the interceptors around the handler, the first outermost', async () => {
    const seen: string[] = [];
    const tag = (name: string): Interceptor<number, number> => async (input, next) => {
      seen.push(`${name} in ${input}`);
      const out = await next(input + 1);
      seen.push(`${name} out ${out}`);
      return out * 10;
    };
    const handler = intercept((n: number) => {
      seen.push(`handler ${n}`);
      return Promise.resolve(n);
    }, tag('a'), tag('b'));
    expect(await handler(1)).toBe(300);
    expect(seen).toEqual(['a in 1', 'b in 2', 'handler 3', 'b out 3', 'a out 30']);
  });

  it('an interceptor may answer without calling next; with none, the handler alone runs', async () => {
    const refuse: Interceptor<number, string> = () => Promise.resolve('refused');
    expect(await intercept(() => Promise.resolve('ran'), refuse)(1)).toBe('refused');
    expect(await intercept((n: number) => Promise.resolve(`ran ${n}`))(2)).toBe('ran 2');
  });

  it('the tracer is got once', () => {
    expect(tracer()).toBe(tracer());
  });
});
