/**
 * Large payloads' settings (decision 0021 §4.1): TRIAD_INLINE_MAX_BYTES (above it an input or output goes
 * to the object store; default 262144, at least 1024, at most the 1 MB message limit minus 64 KiB) and
 * TRIAD_MAX_OBJECT_BYTES (the largest object written or read; default 64 MiB). Unset: the default.
 */
import { DEFAULT_INLINE_MAX_BYTES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_OBJECT_BYTES, ErrorCode, MIN_INLINE_MAX_BYTES, TriadError } from '@triad/protocol';

export interface PayloadSettings {
  inlineMaxBytes: number;
  maxObjectBytes: number;
}

export function payloadSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): PayloadSettings {
  const details: string[] = [];
  const read = (name: string, def: number, min: number, max: number, hint: string): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return def;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      details.push(`${name} is "${raw}": set it to ${hint} (${min}–${max}), or unset it for the default (${def})`);
      return def;
    }
    return n;
  };
  const inlineMaxBytes = read('TRIAD_INLINE_MAX_BYTES', DEFAULT_INLINE_MAX_BYTES, MIN_INLINE_MAX_BYTES, DEFAULT_MAX_MESSAGE_BYTES - 65_536, 'the size in bytes above which a payload goes to the object store');
  const maxObjectBytes = read('TRIAD_MAX_OBJECT_BYTES', DEFAULT_MAX_OBJECT_BYTES, 1_024, 2 ** 40, 'the largest payload object in bytes');
  if (details.length > 0) throw new TriadError(ErrorCode.InvalidConfig, `invalid configuration: ${details.join('; ')}`, { details });
  return { inlineMaxBytes, maxObjectBytes };
}
