import type { OperationHandler } from '../http/types.js';
import { setSubscriberCredentials } from '../engine/subscriber-credentials.js';

export const updateSubscriberCredentials: OperationHandler<'updateSubscriberCredentials'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await setSubscriberCredentials(deps, auth.environmentId, params.subscriberId, body) },
});
