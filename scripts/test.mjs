#!/usr/bin/env node
// `npm test`: builds every workspace, type-checks the test files, runs the whole vitest suite against
// real nats-server and redis-server processes, and fails unless tests actually ran (none skipped, none failed).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';

const run = (cmd, args) => spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, DO_NOT_TRACK: '1' } }).status ?? 1;
const fail = (msg) => {
  console.error(`test: ${msg}`);
  process.exit(1);
};

for (const bin of ['nats-server', 'redis-server']) {
  if (spawnSync(bin, ['--version'], { stdio: 'ignore' }).error) {
    fail(`${bin} is not on PATH. Install it (Debian/Ubuntu: apt-get install -y ${bin}) and run npm test again.`);
  }
}

if (run('npx', ['turbo', 'run', 'build', '--output-logs=errors-only']) !== 0) fail('the build failed (see above); fix it before the tests can run.');

// Test files belong to no package build, and vitest does not type-check: do it here.
const testProjects = ['packages', 'apps']
  .flatMap((top) => readdirSync(top).map((d) => `${top}/${d}/test/tsconfig.json`))
  .filter((p) => existsSync(p));
for (const project of testProjects) {
  if (run('npx', ['tsc', '-p', project]) !== 0) fail(`the tests in ${project.replace('/tsconfig.json', '')} do not type-check (see above).`);
}

mkdirSync('.triad', { recursive: true });
const report = '.triad/vitest-report.json';
rmSync(report, { force: true });
const status = run('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)]);

let r;
try {
  r = JSON.parse(readFileSync(report, 'utf8'));
} catch {
  fail('vitest wrote no report; it did not run the suite.');
}
const passed = r.numPassedTests ?? 0;
const failed = r.numFailedTests ?? 0;
const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
if (passed === 0) fail('no test ran — that is a failure, not a pass.');
if (skipped > 0) fail('some tests were skipped; a skipped test proves nothing. Remove the skip or the test.');
if (failed > 0 || (r.numFailedTestSuites ?? 0) > 0 || status !== 0) process.exit(status || 1);
