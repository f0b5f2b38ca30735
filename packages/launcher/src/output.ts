/** Keeps the recent stdout/stderr of a child as lines, and lets callers wait for a line to appear. */
import type { Readable } from 'node:stream';
import { WaitTimeoutError } from './wait.js';

interface LineWaiter {
  readonly pattern: RegExp;
  resolve(line: string): void;
  reject(error: Error): void;
}

/**
 * Combined output of one or more streams, assembled into lines per stream (so stdout and stderr
 * chunks never splice into each other's lines) and capped to the last `capChars` characters.
 */
export class OutputTail {
  readonly #capChars: number;
  #lines: string[] = [];
  #head = 0;
  #chars = 0;
  #total = 0;
  #partials = new Map<string, string>();
  #waiters = new Set<LineWaiter>();
  #endedBecause: string | undefined;

  constructor(capChars: number) {
    this.#capChars = capChars;
  }

  /** Feeds `stream` into this tail; `key` names the stream so its partial line stays its own. */
  attach(stream: Readable | null, key: string): void {
    if (stream === null) return;
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => this.#append(key, chunk));
  }

  /** Adds a line of the caller's own (e.g. a restart marker) so the log tells the story in order. */
  note(line: string): void {
    this.#addLine(line);
  }

  /** The retained output: complete lines, then any unterminated ones. */
  text(): string {
    const complete = this.#lines.slice(this.#head);
    const partials = [...this.#partials.values()].filter((partial) => partial !== '');
    return complete.map((line) => `${line}\n`).join('') + partials.join('\n');
  }

  /** A position in the output; pass it to `linesSince` to see what one launch of a process printed. */
  mark(): number {
    return this.#total;
  }

  /** Complete lines added after `mark` that are still retained. */
  linesSince(mark: number): string[] {
    const firstRetained = this.#total - (this.#lines.length - this.#head);
    return this.#lines.slice(this.#head + Math.max(0, mark - firstRetained));
  }

  /** The last `maxChars` characters, for error messages. */
  tail(maxChars = 4_000): string {
    const text = this.text();
    return text.length <= maxChars ? text : `…${text.slice(-maxChars)}`;
  }

  /**
   * The first retained line matching `pattern`, or the first one to arrive. Only complete lines
   * count (a half-written "port 12" must not match /port (\d+)/), except at the end, when the
   * unterminated rest is flushed as a line.
   */
  waitForLine(pattern: RegExp, timeoutMs: number, what: string): Promise<string> {
    // A /g or /y regex carries lastIndex between test() calls; a clean copy matches every line from 0.
    const re = new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
    const existing = this.#lines.slice(this.#head).find((line) => re.test(line));
    if (existing !== undefined) return Promise.resolve(existing);
    if (this.#endedBecause !== undefined) {
      return Promise.reject(new Error(`${what}: ${this.#endedBecause} without a line matching ${re}; last output:\n${this.tail()}`));
    }
    return new Promise<string>((resolve, reject) => {
      const waiter: LineWaiter = {
        pattern: re,
        resolve: (line) => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          resolve(line);
        },
        reject: (error) => {
          clearTimeout(timer);
          this.#waiters.delete(waiter);
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        waiter.reject(
          new WaitTimeoutError(
            `timed out after ${timeoutMs}ms waiting for ${what} to print a line matching ${re}; last output:\n${this.tail()}`,
          ),
        );
      }, timeoutMs);
      this.#waiters.add(waiter);
    });
  }

  /** No more output will come (the process ended): flush partial lines and fail pending waits. */
  end(reason: string, what: string): void {
    for (const [key, partial] of this.#partials) {
      this.#partials.delete(key);
      if (partial !== '') this.#addLine(partial);
    }
    this.#endedBecause = reason;
    for (const waiter of [...this.#waiters]) {
      waiter.reject(new Error(`${what}: ${reason} without a line matching ${waiter.pattern}; last output:\n${this.tail()}`));
    }
  }

  #append(key: string, chunk: string): void {
    const pieces = ((this.#partials.get(key) ?? '') + chunk).split('\n');
    let rest = pieces.pop() ?? '';
    for (const piece of pieces) this.#addLine(piece.endsWith('\r') ? piece.slice(0, -1) : piece);
    // A stream that never writes a newline must not grow without bound either.
    if (rest.length > this.#capChars) {
      this.#addLine(rest);
      rest = '';
    }
    this.#partials.set(key, rest);
  }

  #addLine(line: string): void {
    this.#lines.push(line);
    this.#total += 1;
    this.#chars += line.length + 1;
    while (this.#chars > this.#capChars && this.#head < this.#lines.length - 1) {
      this.#chars -= (this.#lines[this.#head] ?? '').length + 1;
      this.#head += 1;
    }
    // Drop the consumed prefix now and then instead of shifting the array on every line.
    if (this.#head > 1024 && this.#head * 2 > this.#lines.length) {
      this.#lines = this.#lines.slice(this.#head);
      this.#head = 0;
    }
    for (const waiter of [...this.#waiters]) {
      if (waiter.pattern.test(line)) waiter.resolve(line);
    }
  }
}
