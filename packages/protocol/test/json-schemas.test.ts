// docs/protocol/ holds the JSON Schema of every protocol v1 message, generated from the zod schemas; this
// fails when a schema changed and the files were not regenerated (npm run protocol:schemas).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { API_OPS, protocolJsonSchemas } from '../src/index.js';

const DIR = fileURLToPath(new URL('../../../docs/protocol/', import.meta.url));
const REGENERATE = 'regenerate them with `npm run protocol:schemas` and commit docs/protocol/';

function filesUnder(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? filesUnder(join(dir, f), `${prefix}${f}/`) : [`${prefix}${f}`]));
}

describe('docs/protocol JSON Schemas', () => {
  const generated = protocolJsonSchemas();

  it('cover every message and every API operation', () => {
    for (const m of ['submission', 'step-request', 'step-result', 'step-result-batch', 'task-event-batch', 'supervisor-command', 'alert', 'dead-letter', 'workflow-definition', 'api-reply']) {
      expect(Object.keys(generated)).toContain(`${m}.schema.json`);
    }
    for (const op of API_OPS) {
      expect(Object.keys(generated)).toContain(`api/${op}.request.schema.json`);
      expect(Object.keys(generated)).toContain(`api/${op}.reply.schema.json`);
    }
  });

  it('are up to date with the zod schemas', () => {
    expect(filesUnder(DIR).sort(), `the files in docs/protocol/ differ from the generated set: ${REGENERATE}`).toEqual(Object.keys(generated).sort());
    for (const [name, schema] of Object.entries(generated)) {
      const committed = JSON.parse(readFileSync(join(DIR, name), 'utf8')) as unknown;
      expect(committed, `docs/protocol/${name} is stale: ${REGENERATE}`).toEqual(schema);
    }
  });

  it('describe the wire rules: integers as integers, the task id and name patterns', () => {
    const step = generated['step-request.schema.json'] as { properties: Record<string, { type?: string; pattern?: string }>; required: string[] };
    expect(step.properties['completeBy']?.type).toBe('integer');
    expect(step.properties['attempt']?.type).toBe('integer');
    expect(step.properties['taskId']?.pattern).toBe('^[A-Za-z0-9_:-]{1,128}$');
    expect(step.required).toEqual(expect.arrayContaining(['taskId', 'step', 'agent', 'kind', 'attempt', 'idempotencyKey', 'completeBy', 'needs', 'dispatchedAt']));
  });
});
