import type { OperationHandler } from '../http/types.js';
import { globalPreferences, updatePreferences, workflowPreferences } from '../engine/subscriber-preferences.js';

export const getSubscriberPreferences: OperationHandler<'getSubscriberPreferences'> = async ({ params, query, auth, deps }) => ({
  status: 200,
  body: { data: await workflowPreferences(deps, auth.environmentId, params.subscriberId, query.includeInactiveChannels) },
});

export const getSubscriberGlobalPreferences: OperationHandler<'getSubscriberGlobalPreferences'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await globalPreferences(deps, auth.environmentId, params.subscriberId) },
});

export const updateSubscriberPreferences: OperationHandler<'updateSubscriberPreferences'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await updatePreferences(deps, auth.environmentId, params.subscriberId, body) },
});
