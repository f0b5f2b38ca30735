#!/usr/bin/env node
// `npm test`: builds every workspace, type-checks the test files, runs the whole vitest suite against
// real nats-server and redis-server processes (then the container stacks, in Docker, in a run of their
// own), and fails unless tests actually ran (none skipped, none failed).
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

// Without arguments: the whole suite, then the container stacks (test/containers: Docker builds and
// runs whole stacks, which would starve the other files of the two cores) in a run of their own.
// With arguments (npm test -- <filter>, npm run test:containers): one run of what they name.
const CONTAINERS = 'test/containers';
const args = process.argv.slice(2);
const runs = args.length > 0 ? [args] : [['--exclude', `${CONTAINERS}/**`], [CONTAINERS]];

let passed = 0;
let failed = 0;
let skipped = 0;
let broken = false;
for (const [i, runArgs] of runs.entries()) {
  const report = `.triad/vitest-report${i === 0 ? '' : `-${i}`}.json`;
  rmSync(report, { force: true });
  const status = run('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...runArgs]);
  let r;
  try {
    r = JSON.parse(readFileSync(report, 'utf8'));
  } catch {
    fail(`vitest wrote no report for ${runArgs.join(' ')}; it did not run the suite.`);
  }
  passed += r.numPassedTests ?? 0;
  failed += r.numFailedTests ?? 0;
  skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  if ((r.numPassedTests ?? 0) === 0) fail(`no test ran in ${runArgs.join(' ')} — that is a failure, not a pass.`);
  if ((r.numFailedTestSuites ?? 0) > 0 || status !== 0) broken = true;
}
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
if (skipped > 0) fail('some tests were skipped; a skipped test proves nothing. Remove the skip or the test.');
if (failed > 0 || broken) process.exit(1);
