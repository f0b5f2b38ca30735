#!/usr/bin/env node
// `npm test`: builds every workspace, runs the whole vitest suite against real nats-server and
// redis-server processes, and fails unless tests actually ran (none skipped, none failed).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

const run = (cmd, args) => spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, DO_NOT_TRACK: '1' } }).status ?? 1;

for (const bin of ['nats-server', 'redis-server']) {
  if (spawnSync(bin, ['--version'], { stdio: 'ignore' }).error) {
    console.error(`test: ${bin} is not on PATH. Install it (Debian/Ubuntu: apt-get install -y ${bin}) and run npm test again.`);
    process.exit(1);
  }
}

if (run('npx', ['turbo', 'run', 'build', '--output-logs=errors-only']) !== 0) {
  console.error('test: the build failed (see above); fix it before the tests can run.');
  process.exit(1);
}

mkdirSync('.triad', { recursive: true });
const report = '.triad/vitest-report.json';
rmSync(report, { force: true });
const status = run('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)]);

let r;
try {
  r = JSON.parse(readFileSync(report, 'utf8'));
} catch {
  console.error('test: vitest wrote no report; it did not run the suite.');
  process.exit(1);
}
const passed = r.numPassedTests ?? 0;
const failed = r.numFailedTests ?? 0;
const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
const failedSuites = r.numFailedTestSuites ?? 0;
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
if (passed === 0) {
  console.error('test: no test ran — that is a failure, not a pass.');
  process.exit(1);
}
if (skipped > 0) {
  console.error('test: some tests were skipped; a skipped test proves nothing. Remove the skip or the test.');
  process.exit(1);
}
if (failed > 0 || failedSuites > 0 || status !== 0) process.exit(status || 1);
