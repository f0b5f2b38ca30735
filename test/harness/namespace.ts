// Makes names that no other test, worker or run can share: subject prefixes, key prefixes, stream names.
import { randomBytes } from 'node:crypto';

const ALLOWED = /^[A-Za-z0-9_-]{1,40}$/;
let counter = 0;

/**
 * `<prefix>_<pid>_<counter>_<random>`, matching /^[A-Za-z0-9_-]{1,40}$/ so it is valid as a NATS
 * subject token, a stream or consumer name and a Redis key part. The pid separates parallel vitest
 * workers, the counter separates calls in one worker, and the random part covers pid reuse and
 * module re-evaluation (which resets the counter).
 */
export function uniqueNamespace(prefix = 't'): string {
  counter += 1;
  const name = `${prefix}_${process.pid.toString(36)}_${counter.toString(36)}_${randomBytes(4).toString('hex')}`;
  if (!ALLOWED.test(name)) {
    throw new RangeError(
      `uniqueNamespace: prefix ${JSON.stringify(prefix)} must be letters, digits, '_' or '-' and short ` +
        `enough for the name to stay within 40 characters (got ${JSON.stringify(name)})`,
    );
  }
  return name;
}
