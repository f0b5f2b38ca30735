#!/usr/bin/env node
// Writes the JSON Schema of every protocol v1 message into docs/protocol/ (run after `npm run build`;
// `npm run protocol:schemas` does both). packages/protocol/test/json-schemas.test.ts fails when they are stale.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { protocolJsonSchemas } from '../packages/protocol/dist/index.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'protocol');
const files = protocolJsonSchemas();
rmSync(dir, { recursive: true, force: true });
for (const [name, schema] of Object.entries(files)) {
  const path = join(dir, name);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(schema, null, 2)}\n`);
}
console.log(`wrote ${Object.keys(files).length} schemas to ${dir}: ${readdirSync(dir).join(', ')}`);
