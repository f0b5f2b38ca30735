/**
 * Where a scheduler may answer a request (decision 0022): only the requester's own inbox, so no request
 * can make a scheduler publish to a subject of its choosing (another client's inbox, a stream's subject).
 */
import { NAME_PATTERN, type ApiRequestSubject, type Names } from '@triad/protocol';
import { OPERATOR_CLIENT_ID } from '@triad/permissions';

/** The prefix of a reply subject nats-server makes for a request that came through a service import. */
export const SERVICE_IMPORT_REPLY_PREFIX = '_R_.';

export type ReplyCheck = { ok: true } | { ok: false; reason: string };

/**
 * A request's reply subject is allowed when it is
 * - a service import's reply (`_R_.…`): the server made it and routes the answer back into the requester's
 *   own account, whatever subject the requester named;
 * - on `api.client.<c>.<op>`: in `_INBOX.<ns>.<c>.` or the operator's `_INBOX.<ns>.operator.`;
 * - on `api.<op>` (or an unknown operation): in an inbox of the namespace, `_INBOX.<ns>.<name>.` for a
 *   client id `<name>` (an unsecured deployment has no identities to tell them apart by).
 */
export function apiReplyAllowed(n: Names, request: ApiRequestSubject | undefined, reply: string): ReplyCheck {
  if (reply.startsWith(SERVICE_IMPORT_REPLY_PREFIX)) return { ok: true };
  const inboxes = `_INBOX.${n.namespace}.`;
  const owner = reply.startsWith(inboxes) ? reply.slice(inboxes.length).split('.') : [];
  const token = owner.length >= 2 ? owner[0] : undefined;
  if (request?.client !== undefined) {
    if (token === request.client || token === OPERATOR_CLIENT_ID) return { ok: true };
    return {
      ok: false,
      reason: `reply subject "${reply}" is not client ${request.client}'s inbox (${n.subjects.inboxPrefix(request.client)}.…) nor the operator's: not answered (a client sets its connection's inbox prefix to ${n.subjects.inboxPrefix('<client>')})`,
    };
  }
  if (token !== undefined && NAME_PATTERN.test(token)) return { ok: true };
  return {
    ok: false,
    reason: `reply subject "${reply}" is not an inbox of namespace "${n.namespace}" (${n.subjects.inboxPrefix('<client>')}.…): not answered (a client sets its connection's inbox prefix to ${n.subjects.inboxPrefix('<client>')})`,
  };
}

/** Discovery (`$SRV.*`) answers tools such as `nats micro ls` on any inbox, and on nothing else. */
export function discoveryReplyAllowed(reply: string): boolean {
  return reply.startsWith('_INBOX.') || reply.startsWith(SERVICE_IMPORT_REPLY_PREFIX);
}
