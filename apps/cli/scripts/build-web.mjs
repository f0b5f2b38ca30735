#!/usr/bin/env node
// Bundles the dashboard's page (src/web, Preact + htm) into dist/web with esbuild: one minified app.js,
// the stylesheet and index.html. Run by the package's build after tsc has checked the sources.
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'web');
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(root, 'src', 'web', 'main.ts')],
  outfile: join(out, 'app.js'),
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2020'],
  legalComments: 'none',
  logLevel: 'warning',
});
for (const f of ['index.html', 'app.css']) copyFileSync(join(root, 'src', 'web', f), join(out, f));
const size = statSync(join(out, 'app.js')).size;
// A guard on the bundle's size: the stack was chosen to keep it small (decision 0014).
if (size > 120_000) throw new Error(`dist/web/app.js is ${size} bytes, over the 120 kB budget: what grew it?`);
