/** The client's connection options from the environment, the way every Triad process reads them. */
import { ClientIdSchema, ErrorCode, NamespaceSchema, TriadError } from '@triad/protocol';
import { checkNatsSettings, natsOptionsFromEnv, payloadSettingsFromEnv, type SettingLabels } from '@triad/settings';
import type { ClientOptions } from './client.js';

/**
 * NATS_URL, the NATS credentials and TLS settings (NATS_CREDS, NATS_NKEY_SEED, NATS_USER/NATS_PASSWORD,
 * NATS_TOKEN, NATS_TLS_CA/CERT/KEY), TRIAD_NAMESPACE and TRIAD_CLIENT_ID, checked: a TriadError INVALID_CONFIG names every
 * setting that is wrong. `labels` renames settings in messages (the CLI names its flags).
 */
export function clientOptionsFromEnv(env: NodeJS.ProcessEnv = process.env, labels?: SettingLabels): ClientOptions {
  const { url, ...nats } = natsOptionsFromEnv(env, labels);
  const details = checkNatsSettings({ url, ...nats }).problems.map((p) => p.message);
  const namespace = env['TRIAD_NAMESPACE'] || undefined;
  if (namespace !== undefined) {
    const ns = NamespaceSchema.safeParse(namespace);
    if (!ns.success) details.push(`TRIAD_NAMESPACE: ${ns.error.issues[0]?.message ?? 'invalid namespace'}`);
  }
  const clientId = env['TRIAD_CLIENT_ID'] || undefined;
  if (clientId !== undefined) {
    const id = ClientIdSchema.safeParse(clientId);
    if (!id.success) details.push(`TRIAD_CLIENT_ID: ${id.error.issues[0]?.message ?? 'invalid client id'}`);
  }
  if (details.length > 0) throw new TriadError(ErrorCode.InvalidConfig, `invalid configuration: ${details.join('; ')}`, { details });
  // Large payloads' settings only when set (TriadClient.connect applies the defaults).
  const payloads = env['TRIAD_INLINE_MAX_BYTES'] || env['TRIAD_MAX_OBJECT_BYTES'] ? payloadSettingsFromEnv(env) : {};
  return { ...nats, ...payloads, ...(url !== undefined ? { natsUrl: url } : {}), ...(namespace !== undefined ? { namespace } : {}), ...(clientId !== undefined ? { clientId } : {}) };
}
