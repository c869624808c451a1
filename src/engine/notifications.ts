// A notification as GET /notifications/{id} shows it: with the jobs that carried it out, in
// Herald's shape or, for a request made with Novu's `ApiKey` scheme, in the shape Novu's SDKs check.
import type { Deps } from '../deps.js';
import type { Schemas } from '../contract.js';
import { notFound } from '../errors.js';
import { findNotification } from '../db/repos/notifications.js';
import { jobsOfNotification, type StoredJob } from '../db/repos/jobs.js';

type Notification = Schemas['Notification'];
export type NotificationWithJobs = Notification & { jobs: Schemas['Job'][] };
export type NotificationWithNovuJobs = Notification & { jobs: Schemas['NovuJob'][] };

export function notificationWithJobs(deps: Deps, environmentId: string, notificationId: string): Promise<NotificationWithJobs>;
export function notificationWithJobs(deps: Deps, environmentId: string, notificationId: string, shape: 'novu'): Promise<NotificationWithNovuJobs>;
export function notificationWithJobs(deps: Deps, environmentId: string, notificationId: string, shape: 'herald' | 'novu'): Promise<NotificationWithJobs | NotificationWithNovuJobs>;
export async function notificationWithJobs(
  deps: Deps,
  environmentId: string,
  notificationId: string,
  shape: 'herald' | 'novu' = 'herald',
): Promise<NotificationWithJobs | NotificationWithNovuJobs> {
  const notification = await findNotification(deps.db, environmentId, notificationId, true);
  if (!notification) throw notFound(`Notification ${notificationId} not found`);
  const jobs = await jobsOfNotification(deps.db, notification.notificationId);
  // Added to the notification, not spread into a copy: a large payload stays the stored text.
  return shape === 'novu' ? Object.assign(notification, { jobs: jobs.map(novuJob) }) : Object.assign(notification, { jobs: jobs.map(heraldJob) });
}

function heraldJob(job: StoredJob): Schemas['Job'] {
  return { ...job, executionDetails: job.executionDetails.map(({ id: _detailId, ...detail }) => detail) };
}

/** Novu's id for each of Herald's providers: the same but for SMTP, and `novu` (Novu's own) for Herald's in-app feed. */
const NOVU_PROVIDER: Record<Schemas['ProviderId'], Schemas['NovuProviderId']> = {
  herald: 'novu',
  smtp: 'nodemailer',
  sendgrid: 'sendgrid',
  twilio: 'twilio',
  slack: 'slack',
  discord: 'discord',
  msteams: 'msteams',
  expo: 'expo',
  'push-webhook': 'push-webhook',
};

/** Novu requires a provider on every job and detail; a step that sends nothing (delay, digest, no integration) was Herald's own doing. */
const novuProvider = (providerId: Schemas['ProviderId'] | undefined): Schemas['NovuProviderId'] => NOVU_PROVIDER[providerId ?? 'herald'];

const NOVU_DETAIL_STATUS: Record<Schemas['ExecutionDetail']['status'], Schemas['NovuExecutionDetail']['status']> = {
  pending: 'Pending',
  queued: 'Queued',
  success: 'Success',
  warning: 'Warning',
  failed: 'Failed',
};

/** The same job under Novu's names and values (`NovuJob` in the contract says which is which). */
function novuJob(job: StoredJob): Schemas['NovuJob'] {
  const providerId = novuProvider(job.providerId);
  return {
    _id: job.jobId,
    // Novu's list of step kinds has no throttle; `custom` is its word for a step of another kind.
    type: job.type === 'throttle' ? 'custom' : job.type,
    status: job.status,
    providerId,
    step: { _id: job.stepId, _templateId: job.stepId, active: true, filters: [] },
    createdAt: job.createdAt,
    updatedAt: job.updatedAt,
    executionDetails: job.executionDetails.map((detail) => ({
      _id: detail.id,
      _jobId: job.jobId,
      status: NOVU_DETAIL_STATUS[detail.status],
      detail: detail.detail,
      providerId: detail.providerId ? novuProvider(detail.providerId) : providerId,
      ...(detail.raw !== undefined ? { raw: detail.raw } : {}),
      isRetry: detail.isRetry,
      isTest: false,
      source: 'Internal',
      createdAt: detail.createdAt,
    })),
  };
}
