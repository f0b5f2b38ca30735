// Seeded randomness for the chaos run: one seed, independent streams per concern, so a seed replays the same choices.
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import type { JumpableRandomGenerator } from 'pure-rand/types/JumpableRandomGenerator';

/**
 * A stream of random choices. `fork()` hands out an independent stream (a jump of 2^64 draws), so the
 * fault lanes, the submissions and each service draw from their own sequence: how many values one of
 * them consumes (timing decides that) never shifts what another one picks.
 */
export class Random {
  readonly #rng: JumpableRandomGenerator;

  constructor(seed: number | JumpableRandomGenerator) {
    this.#rng = typeof seed === 'number' ? xoroshiro128plus(seed) : seed;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return uniformFloat64(this.#rng);
  }

  /** Uniform whole number in [min, max], both included. */
  int(min: number, max: number): number {
    return uniformInt(this.#rng, min, max);
  }

  /** Uniform in [min, max). */
  between(min: number, max: number): number {
    return min + (max - min) * this.float();
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('Random.pick needs at least one item to pick from');
    return items[this.int(0, items.length - 1)]!;
  }

  /** The items in a random order (Fisher–Yates on a copy). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** An independent stream: the fork continues from here, this stream jumps 2^64 draws ahead. */
  fork(): Random {
    const child = this.#rng.clone();
    this.#rng.jump();
    return new Random(child);
  }
}
