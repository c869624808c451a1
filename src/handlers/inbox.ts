import type { OperationHandler } from '../http/types.js';
import type { Auth } from '../contract.js';
import { pageRequest } from '../db/paginate.js';
import { unauthorized } from '../errors.js';
import { inboxCounts, listInbox, markInboxMessage, markInboxMessages, removeInboxMessage, type InboxOwner } from '../engine/inbox.js';
import { createStreamTicket, mintSubscriberToken } from '../engine/inbox-tokens.js';
import { changeInboxSettings, inboxSettings, startInboxSession } from '../engine/inbox-sessions.js';
import { updatePreferences, workflowPreferences } from '../engine/subscriber-preferences.js';

/** The subscriber a token speaks for: every inbox operation acts for it alone. */
function ownerOf(auth: Auth): InboxOwner {
  if (auth.subscriberId === undefined) throw unauthorized('Missing subscriber token');
  return { environmentId: auth.environmentId, subscriberId: auth.subscriberId };
}

export const createInboxToken: OperationHandler<'createInboxToken'> = async ({ params, body, auth, deps }) => ({
  status: 201,
  body: { data: await mintSubscriberToken(deps, auth.environmentId, params.subscriberId, body?.expiresIn) },
});

export const listInboxMessages: OperationHandler<'listInboxMessages'> = async ({ query, auth, deps, reserve }) => ({
  status: 200,
  body: await listInbox(deps, ownerOf(auth), pageRequest(query, reserve), query),
});

export const getInboxCounts: OperationHandler<'getInboxCounts'> = async ({ auth, deps }) => ({
  status: 200,
  body: { data: await inboxCounts(deps, ownerOf(auth)) },
});

export const updateInboxMessage: OperationHandler<'updateInboxMessage'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await markInboxMessage(deps, ownerOf(auth), params.messageId, body) },
});

export const deleteInboxMessage: OperationHandler<'deleteInboxMessage'> = async ({ params, auth, deps }) => {
  await removeInboxMessage(deps, ownerOf(auth), params.messageId);
  return { status: 204, body: undefined };
};

export const updateInboxMessageAction: OperationHandler<'updateInboxMessageAction'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await markInboxMessage(deps, ownerOf(auth), params.messageId, { action: { which: params.actionType, status: body.status } }) },
});

export const updateInboxMessages: OperationHandler<'updateInboxMessages'> = async ({ body, auth, deps }) => ({
  status: 200,
  body: { data: await markInboxMessages(deps, ownerOf(auth), body.set, body.upTo) },
});

export const getInboxPreferences: OperationHandler<'getInboxPreferences'> = async ({ auth, deps }) => {
  const owner = ownerOf(auth);
  return { status: 200, body: { data: await workflowPreferences(deps, owner.environmentId, owner.subscriberId, false) } };
};

export const updateInboxPreferences: OperationHandler<'updateInboxPreferences'> = async ({ body, auth, deps }) => {
  const owner = ownerOf(auth);
  return { status: 200, body: { data: await updatePreferences(deps, owner.environmentId, owner.subscriberId, body) } };
};

/** The stream is written by http/inbox-stream.ts, which api.ts puts in this operation's place. */
export const streamInboxEvents: OperationHandler<'streamInboxEvents'> = async () => ({ status: 200, body: undefined });

export const createInboxEventTicket: OperationHandler<'createInboxEventTicket'> = async ({ auth, deps }) => {
  const owner = ownerOf(auth);
  // Only a subscriber token is let in here, and a token has its credential.
  if (!auth.credential) throw unauthorized('Missing subscriber token');
  return { status: 201, body: { data: await createStreamTicket(deps, { organizationId: auth.organizationId, ...owner, credential: auth.credential }) } };
};

export const getInboxSettings: OperationHandler<'getInboxSettings'> = async ({ auth, deps }) => ({
  status: 200,
  body: { data: await inboxSettings(deps, auth.environmentId) },
});

export const updateInboxSettings: OperationHandler<'updateInboxSettings'> = async ({ body, auth, deps }) => ({
  status: 200,
  body: { data: await changeInboxSettings(deps, auth.environmentId, body) },
});

/** No credential but the hash in the body: `auth` is empty here, and the environment comes from the applicationIdentifier. */
export const createInboxSession: OperationHandler<'createInboxSession'> = async ({ body, deps, origin }) => ({
  status: 201,
  body: { data: await startInboxSession(deps, body, origin) },
});
