// A notification as GET /notifications/{id} shows it: with the jobs that carried it out.
import type { Deps } from '../deps.js';
import type { Schemas } from '../contract.js';
import { notFound } from '../errors.js';
import { findNotification } from '../db/repos/notifications.js';
import { jobsOfNotification } from '../db/repos/jobs.js';

export async function notificationWithJobs(deps: Deps, environmentId: string, notificationId: string): Promise<Schemas['NotificationResponse']['data']> {
  const notification = await findNotification(deps.db, environmentId, notificationId);
  if (!notification) throw notFound(`Notification ${notificationId} not found`);
  return { ...notification, jobs: await jobsOfNotification(deps.db, notification.notificationId) };
}
