import type { OperationHandler } from '../http/types.js';
import { notFound } from '../errors.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/notifications.js';
import { jobsOfNotification } from '../db/repos/jobs.js';

export const listNotifications: OperationHandler<'listNotifications'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await repo.listNotifications(deps.db, auth.environmentId, pageRequest(query), query),
});

export const getNotificationStats: OperationHandler<'getNotificationStats'> = async ({ auth, deps }) => ({
  status: 200,
  body: { data: await repo.notificationStats(deps.db, auth.environmentId, deps.clock.now()) },
});

export const getNotification: OperationHandler<'getNotification'> = async ({ params, auth, deps }) => {
  const notification = await repo.findNotification(deps.db, auth.environmentId, params.notificationId);
  if (!notification) throw notFound(`Notification ${params.notificationId} not found`);
  return { status: 200, body: { data: { ...notification, jobs: await jobsOfNotification(deps.db, notification.notificationId) } } };
};
