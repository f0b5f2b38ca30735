/**
 * JSON Schemas of every protocol v1 message, generated from the zod schemas (the wire shape: what a
 * writer may send; `io: 'input'`), for docs/protocol/ — so a client or agent in any language can check
 * its messages without reading TypeScript. A test keeps the committed files equal to this output.
 */
import { z } from 'zod';
import { API } from './api.js';
import { WorkflowDefinitionSchema } from './definition.js';
import {
  AlertSchema,
  ApiReplySchema,
  DeadLetterSchema,
  ProbeReplySchema,
  ProbeRequestSchema,
  StepRequestSchema,
  StepResultSchema,
  SubmissionSchema,
  SupervisorCommandSchema,
  SupervisorHealthSchema,
  TaskEventBatchSchema,
} from './messages.js';
import { StepResultBatchSchema } from './result-batch.js';
import { ObjectRefSchema } from './objects.js';
import { StepRequestBatchSchema } from './request-batch.js';
import { TaskEventBatchesSchema } from './event-batch.js';

const MESSAGES: Record<string, { schema: z.ZodType; title: string }> = {
  submission: { schema: SubmissionSchema, title: 'A task submission (triad.<ns>.submit.<client>)' },
  'step-request': { schema: StepRequestSchema, title: 'A step request to an agent (triad.<ns>.step.<agent>)' },
  'step-request-batch': { schema: StepRequestBatchSchema, title: 'Several encoded step requests in one message, to an agent that takes batches (triad.<ns>.step.b~<agent>)' },
  'step-result': { schema: StepResultSchema, title: "An agent's result for one step attempt (triad.<ns>.result.<agent>)" },
  'step-result-batch': { schema: StepResultBatchSchema, title: 'Several encoded step results in one message (triad.<ns>.result.<agent>)' },
  'task-event-batch': { schema: TaskEventBatchSchema, title: "One transition's task events (triad.<ns>.event.<client>.<taskId>, and the reply subject)" },
  'task-event-batches': { schema: TaskEventBatchesSchema, title: "Several transitions' encoded task events in one message, to a reply subject that reads them (its last token starts with b~)" },
  'supervisor-command': { schema: SupervisorCommandSchema, title: 'Supervisor to scheduler: send this step attempt (triad.<ns>.command)' },
  alert: { schema: AlertSchema, title: 'An operator alert (triad.<ns>.alert)' },
  'dead-letter': { schema: DeadLetterSchema, title: 'A message that could not be handled, with the reason (triad.<ns>.dlq.<source>)' },
  'supervisor-health': { schema: SupervisorHealthSchema, title: "A supervisor's report (triad.<ns>.health)" },
  'workflow-definition': { schema: WorkflowDefinitionSchema, title: 'A workflow definition (registered with workflow.register)' },
  'probe-request': { schema: ProbeRequestSchema, title: 'Which agent instance holds this attempt? (triad.<ns>.probe.<agent>, core NATS)' },
  'probe-reply': { schema: ProbeReplySchema, title: 'The holding instance answers (on the probe\'s reply subject, triad.<ns>.probed.<agent>.<nonce>.<n>)' },
  'api-reply': { schema: ApiReplySchema, title: 'The envelope of every API reply' },
  'object-ref': { schema: ObjectRefSchema, title: 'A reference to a payload stored in the object store (a map whose first key is $triad; docs/protocol.md §12)' },
};

/** The file name (under docs/protocol/) and JSON Schema of every message and API body. */
export function protocolJsonSchemas(): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  const one = (schema: z.ZodType, title: string): Record<string, unknown> => {
    const json = z.toJSONSchema(schema, {
      io: 'input',
      unrepresentable: 'any',
      // Binary fields (a dead letter's original bytes, a batch's encoded results) are msgpack bin.
      override: (ctx) => {
        const def = (ctx.zodSchema as { _zod?: { def?: { type?: string } } })._zod?.def;
        if (def?.type === 'custom') Object.assign(ctx.jsonSchema, { description: 'msgpack bin (raw bytes)' });
      },
    }) as Record<string, unknown>;
    return { title, ...json };
  };
  for (const [name, m] of Object.entries(MESSAGES)) out[`${name}.schema.json`] = one(m.schema, m.title);
  for (const [op, a] of Object.entries(API)) {
    out[`api/${op}.request.schema.json`] = one(a.request, `${op} request (triad.<ns>.api.${op}): ${a.what}`);
    out[`api/${op}.reply.schema.json`] = one(a.reply, `${op} reply value ({ ok: true, value })`);
  }
  return out;
}
