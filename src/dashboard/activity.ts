// Monitor → Activity: the notifications of each of the owner's environments, filtered as
// GET /v1/notifications filters them, and one notification's timeline as
// GET /v1/notifications/{id} shows it, read through the same repo and engine functions.
import type { Request, Response, Router } from 'express';
import type { Deps } from '../deps.js';
import { CHANNELS, type Schemas } from '../contract.js';
import { listNotificationSummaries } from '../db/repos/notifications.js';
import { notificationWithJobs } from '../engine/notifications.js';
import { sessionOf } from './session.js';
import { chosenEnvironment, pageContext, requireSession, sendPage, unlessNotFound } from './guards.js';
import { messagePage } from './views.js';
import { activityPage, timelinePage, type ActivityFilters } from './activity-views.js';

const PAGE_SIZE = 25;
/** Every status a notification can have (the contract's NotificationStatus). */
const STATUSES = ['pending', 'processing', 'completed', 'failed', 'canceled'] as const satisfies ReadonlyArray<Schemas['NotificationStatus']>;
/** Longer filter values cannot match an id (the API caps them lower still). */
const FILTER_MAX = 200;

/** One query parameter as text: absent, empty, repeated or too long counts as not given. */
function textParam(req: Request, name: string): string | undefined {
  const value = req.query[name];
  return typeof value === 'string' && value.trim() !== '' && value.length <= FILTER_MAX ? value.trim() : undefined;
}

function readFilters(req: Request): { filters: ActivityFilters; ignored: string[]; page: number } {
  const ignored: string[] = [];
  const filters: ActivityFilters = {
    workflowId: textParam(req, 'workflowId'),
    subscriberId: textParam(req, 'subscriberId'),
    transactionId: textParam(req, 'transactionId'),
  };
  const status = textParam(req, 'status');
  if (status && (STATUSES as readonly string[]).includes(status)) filters.status = status as ActivityFilters['status'];
  else if (status) ignored.push(`status “${status}”`);
  const channel = textParam(req, 'channel');
  if (channel && (CHANNELS as readonly string[]).includes(channel)) filters.channel = channel as ActivityFilters['channel'];
  else if (channel) ignored.push(`channel “${channel}”`);
  const pageText = textParam(req, 'page');
  const page = pageText && /^\d{1,6}$/.test(pageText) ? Number(pageText) : 0;
  return { filters, ignored, page };
}

export function activityRoutes(router: Router, deps: Deps): void {
  const { db } = deps;

  const environmentOf = (req: Request, res: Response) => chosenEnvironment(db, req, res, { href: `${req.baseUrl}/activity`, text: 'Back to activity' });

  router.get('/activity', requireSession, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const session = sessionOf(res)!;
    const { filters, ignored, page } = readFilters(req);
    const notifications = await listNotificationSummaries(db, found.environment.id, { page, limit: PAGE_SIZE }, filters);
    sendPage(
      res,
      200,
      activityPage(pageContext(req, res), {
        ...session,
        environments: found.environments,
        environmentId: found.environment.id,
        filters,
        ignored,
        statuses: STATUSES,
        channels: CHANNELS,
        page: notifications,
      }),
    );
  });

  router.get('/activity/:notificationId', requireSession, async (req, res) => {
    const found = await environmentOf(req, res);
    if (!found) return;
    const notification = await unlessNotFound(notificationWithJobs(deps, found.environment.id, String(req.params.notificationId)));
    if (!notification) {
      const back = `${req.baseUrl}/activity?environment=${encodeURIComponent(found.environment.id)}`;
      return sendPage(res, 404, messagePage(pageContext(req, res), 'Notification not found', `There is no such notification in ${found.environment.name}.`, { href: back, text: 'Back to activity' }));
    }
    sendPage(res, 200, timelinePage(pageContext(req, res), { ...sessionOf(res)!, environment: found.environment, notification }));
  });
}
