import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/notifications.js';
import { notificationWithJobs } from '../engine/notifications.js';

export const listNotifications: OperationHandler<'listNotifications'> = async ({ query, auth, deps, reserve }) => ({
  status: 200,
  body: await repo.listNotifications(deps.db, auth.environmentId, pageRequest(query, reserve), query),
});

export const getNotificationStats: OperationHandler<'getNotificationStats'> = async ({ auth, deps }) => ({
  status: 200,
  body: { data: await repo.notificationStats(deps.db, auth.environmentId, deps.clock.now()) },
});

export const getNotification: OperationHandler<'getNotification'> = async ({ params, auth, deps, novuScheme }) => ({
  status: 200,
  body: { data: await notificationWithJobs(deps, auth.environmentId, params.notificationId, novuScheme ? 'novu' : 'herald') },
});
