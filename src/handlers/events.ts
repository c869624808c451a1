import type { OperationHandler } from '../http/types.js';
import { trigger } from '../engine/trigger.js';
import { triggerBulk } from '../engine/bulk-trigger.js';
import { cancelEvent as cancel } from '../engine/cancel.js';

export const triggerEvent: OperationHandler<'triggerEvent'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await trigger(deps, auth, body) },
});

export const triggerEventBulk: OperationHandler<'triggerEventBulk'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await triggerBulk(deps, auth, body.events) },
});

export const cancelEvent: OperationHandler<'cancelEvent'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await cancel(deps, auth.environmentId, params.transactionId) },
});
