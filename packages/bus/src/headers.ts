/**
 * The NATS headers of protocol v1 (docs/protocol.md): every Triad message carries `Triad-Protocol: 1`;
 * a submission may carry its reply subject as `Triad-Reply-To`, so a refusal can be answered even when
 * its body cannot be read. A reader refuses a message of another major version, saying so.
 */
import { headers, type MsgHdrs } from '@nats-io/nats-core';
import { traceHeaders } from '@triad/telemetry';

export const PROTOCOL_HEADER = 'Triad-Protocol';
export const REPLY_TO_HEADER = 'Triad-Reply-To';
/** The major version this code speaks. */
export const PROTOCOL_MAJOR = 1;
const PROTOCOL_VERSION = `${PROTOCOL_MAJOR}`;

/**
 * Headers for a message this process publishes: the protocol version, the trace context of the active
 * span (`traceparent`/`tracestate`, only when tracing is configured; decision 0013), plus `extra` (which
 * may carry its own trace context).
 */
export function protocolHeaders(extra: Record<string, string> = {}): MsgHdrs {
  const h = headers();
  h.set(PROTOCOL_HEADER, PROTOCOL_VERSION);
  if (extra['traceparent'] === undefined) for (const [k, v] of Object.entries(traceHeaders())) h.set(k, v);
  for (const [k, v] of Object.entries(extra)) h.set(k, v);
  return h;
}

/**
 * Why a message cannot be read by this process, when its `Triad-Protocol` header names another major
 * version (`2`, `2.1`); undefined when it names v1 or none (a peer that sets no header speaks v1).
 */
export function unsupportedVersion(h: MsgHdrs | undefined): string | undefined {
  const v = h?.get(PROTOCOL_HEADER) ?? '';
  if (v === '') return undefined;
  const major = /^(\d+)(?:\.\d+)*$/.exec(v.trim())?.[1];
  if (major === PROTOCOL_VERSION) return undefined;
  return `the message is Triad protocol "${v}" (${PROTOCOL_HEADER} header), which this process does not speak: it speaks protocol ${PROTOCOL_MAJOR}; upgrade it, or send protocol ${PROTOCOL_MAJOR}`;
}
