/** Process configuration from the environment, validated once at start-up with a clear error. */
import { z } from 'zod';
import { ClientIdSchema, DEFAULT_CLIENT_ID, NamespaceSchema } from './names.js';
import { ErrorCode, TriadError } from './errors.js';

export const ConfigSchema = z.object({
  natsUrl: z.string().min(1).default('nats://127.0.0.1:4222'),
  redisUrl: z.string().regex(/^rediss?:\/\//, 'REDIS_URL must start with redis:// or rediss://').default('redis://127.0.0.1:6379'),
  namespace: NamespaceSchema.default('default'),
  /** The identity clients and the CLI submit and read under (decision 0010). */
  clientId: ClientIdSchema.default(DEFAULT_CLIENT_ID),
  logLevel: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});
export type Config = z.output<typeof ConfigSchema>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse({
    natsUrl: env['NATS_URL'] || undefined,
    redisUrl: env['REDIS_URL'] || undefined,
    namespace: env['TRIAD_NAMESPACE'] || undefined,
    clientId: env['TRIAD_CLIENT_ID'] || undefined,
    logLevel: env['TRIAD_LOG_LEVEL'] || undefined,
  });
  if (!parsed.success) {
    const envName: Record<string, string> = { natsUrl: 'NATS_URL', redisUrl: 'REDIS_URL', namespace: 'TRIAD_NAMESPACE', clientId: 'TRIAD_CLIENT_ID', logLevel: 'TRIAD_LOG_LEVEL' };
    const details = parsed.error.issues.map((i) => `${envName[String(i.path[0])] ?? String(i.path[0])}: ${i.message}`);
    throw new TriadError(ErrorCode.InvalidConfig, `invalid configuration: ${details.join('; ')}`, { details });
  }
  return parsed.data;
}
