import type { Schemas } from '../contract.js';
import { html } from './html.js';
import { appShell, when, type PageContext, type ShellData } from './views.js';

type Notification = Schemas['Notification'];
type Job = Schemas['Job'];

export interface ActivityFilters {
  workflowId?: string;
  subscriberId?: string;
  status?: Schemas['NotificationStatus'];
  channel?: Schemas['ChannelType'];
  transactionId?: string;
}

export interface ActivityPageData extends ShellData {
  environments: Array<{ id: string; name: string }>;
  environmentId: string;
  filters: ActivityFilters;
  statuses: readonly string[];
  channels: readonly string[];
  page: { data: Array<Omit<Notification, 'payload'>>; totalCount: number; page: number; pageSize: number; hasMore: boolean };
  /** Filter values that were not understood and so not applied. */
  ignored: string[];
}

/** A link to the activity list of `environmentId` with these filters (and page). */
export function activityHref(base: string, environmentId: string, filters: ActivityFilters & { page?: number } = {}): string {
  const query = new URLSearchParams({ environment: environmentId });
  for (const [name, value] of Object.entries(filters)) if (value !== undefined && value !== '') query.set(name, String(value));
  return `${base}/activity?${query}`;
}

const statusBadge = (status: string) => html`<span class="badge status-${status}">${status}</span>`;

export function activityPage(ctx: PageContext, data: ActivityPageData): string {
  const { filters, environmentId, page } = data;
  const environmentName = data.environments.find((e) => e.id === environmentId)?.name ?? '';
  const filtered = (extra: ActivityFilters) => activityHref(ctx.base, environmentId, { ...filters, ...extra });
  const pageHref = (number: number) => activityHref(ctx.base, environmentId, { ...filters, page: number || undefined });
  const rows = page.data.map(
    (n) => html`<tr data-notification-id="${n.notificationId}">
      <td class="nowrap"><a href="${ctx.base}/activity/${n.notificationId}?environment=${environmentId}" title="${n.createdAt}">${n.createdAt.slice(0, 10)} ${n.createdAt.slice(11, 19)}</a></td>
      <td><a class="filter-link" href="${filtered({ workflowId: n.workflowId })}">${n.workflowId}</a></td>
      <td><a class="filter-link" href="${filtered({ subscriberId: n.subscriberId })}">${n.subscriberId}</a></td>
      <td>${n.channels.map((channel) => html`<span class="chip">${channel}</span>`)}</td>
      <td>${statusBadge(n.status)}</td>
      <td><a class="filter-link mono" href="${filtered({ transactionId: n.transactionId })}" title="${n.transactionId}">${short(n.transactionId)}</a></td>
    </tr>`,
  );
  const first = page.page * page.pageSize + 1;
  const last = page.page * page.pageSize + page.data.length;
  const option = (value: string, selected: string | undefined) => html`<option value="${value}"${value === selected ? html` selected` : ''}>${value}</option>`;
  return appShell(
    ctx,
    'Activity',
    data,
    'activity',
    html`<h1>Activity</h1>
    <p class="lead">Every notification of an environment, newest first: open one for its timeline of jobs, attempts and provider answers.</p>
    <nav class="tabs" aria-label="Environments">${data.environments.map(
      (e) => html`<a class="tab${e.id === environmentId ? ' active' : ''}" href="${activityHref(ctx.base, e.id)}"${e.id === environmentId ? html` aria-current="page"` : ''}>${e.name}</a>`,
    )}</nav>
    ${data.ignored.length ? html`<div class="notice bad" role="alert">Not applied: ${data.ignored.join(', ')}.</div>` : ''}
    <section class="card">
      <form class="filters" method="get" action="${ctx.base}/activity" role="search">
        <input type="hidden" name="environment" value="${environmentId}">
        <div><label for="f-workflow">Workflow</label><input id="f-workflow" name="workflowId" maxlength="200" value="${filters.workflowId ?? ''}" placeholder="workflowId"></div>
        <div><label for="f-subscriber">Subscriber</label><input id="f-subscriber" name="subscriberId" maxlength="200" value="${filters.subscriberId ?? ''}" placeholder="subscriberId"></div>
        <div><label for="f-status">Status</label><select id="f-status" name="status"><option value="">any</option>${data.statuses.map((s) => option(s, filters.status))}</select></div>
        <div><label for="f-channel">Channel</label><select id="f-channel" name="channel"><option value="">any</option>${data.channels.map((c) => option(c, filters.channel))}</select></div>
        <div><label for="f-transaction">Transaction</label><input id="f-transaction" name="transactionId" maxlength="200" value="${filters.transactionId ?? ''}" placeholder="transactionId"></div>
        <div class="filter-buttons"><button class="primary" type="submit">Filter</button><a class="button ghost" href="${activityHref(ctx.base, environmentId)}">Clear</a></div>
      </form>
    </section>
    <section class="card">
      <h2><span class="badge env">${environmentName}</span> <span id="activity-count">${page.totalCount}</span> notification${page.totalCount === 1 ? '' : 's'}</h2>
      ${page.data.length === 0
        ? html`<div class="empty">No notifications${Object.values(filters).some((v) => v !== undefined) ? ' match these filters' : ' yet'}.</div>`
        : html`<table class="activity"><thead><tr><th>Created</th><th>Workflow</th><th>Subscriber</th><th>Channels</th><th>Status</th><th>Transaction</th></tr></thead><tbody>${rows}</tbody></table>
      <div class="pager"><span class="muted">${first}–${last} of ${page.totalCount}</span>
        ${page.page > 0 ? html`<a class="button ghost" rel="prev" href="${pageHref(page.page - 1)}">Newer</a>` : ''}
        ${page.hasMore ? html`<a class="button ghost" rel="next" href="${pageHref(page.page + 1)}">Older</a>` : ''}
      </div>`}
    </section>`,
  );
}

const short = (id: string) => (id.length > 14 ? `${id.slice(0, 13)}…` : id);

/** A provider's answer is shown up to this many characters; the API has all of it. */
const RAW_SHOWN = 4096;

export interface TimelinePageData extends ShellData {
  environment: { id: string; name: string };
  notification: Notification & { jobs?: Job[] };
}

function jsonText(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A provider's answer (its status, then its body), the body pretty-printed when it is JSON. */
function rawText(raw: string): string {
  const [, status, body] = /^(\d{3} )?([\s\S]*)$/.exec(raw)!;
  try {
    return `${status ?? ''}${jsonText(JSON.parse(body))}`;
  } catch {
    return raw;
  }
}

export function timelinePage(ctx: PageContext, data: TimelinePageData): string {
  const n = data.notification;
  const back = activityHref(ctx.base, data.environment.id);
  const filtered = (extra: ActivityFilters) => activityHref(ctx.base, data.environment.id, extra);
  const jobs = (n.jobs ?? []).map((job, index) => {
    const details = job.executionDetails.map((detail) => {
      const raw = detail.raw === undefined ? undefined : rawText(detail.raw);
      return html`<li class="detail detail-${detail.status}">
        <div class="detail-head"><time class="muted nowrap" datetime="${detail.createdAt}" title="${detail.createdAt}">${detail.createdAt.slice(11, 23)}</time>
          ${statusBadge(detail.status)}${detail.isRetry ? html`<span class="chip">retry</span>` : ''}${detail.providerId ? html`<span class="chip">${detail.providerId}</span>` : ''}</div>
        <div class="detail-text">${detail.detail}</div>
        ${raw === undefined
          ? ''
          : html`<details class="raw"><summary>Provider answer</summary><pre>${raw.length > RAW_SHOWN ? `${raw.slice(0, RAW_SHOWN)}\n… (${raw.length - RAW_SHOWN} more characters; GET /v1/notifications/${n.notificationId} has all of it)` : raw}</pre></details>`}
      </li>`;
    });
    return html`<li class="job" data-job-id="${job.jobId}">
      <div class="job-head"><span class="step-no">${index + 1}</span><strong>${job.stepId || job.type}</strong><span class="chip">${job.type}</span>${statusBadge(job.status)}
        ${job.providerId ? html`<span class="chip">${job.providerId}</span>` : ''}
        <span class="muted">${job.attempts} attempt${job.attempts === 1 ? '' : 's'}${job.runAt ? html` · runs at ${when(job.runAt)}` : ''} · <code>${job.jobId}</code></span></div>
      ${details.length ? html`<ol class="details">${details}</ol>` : html`<div class="muted detail-none">Nothing recorded yet.</div>`}
    </li>`;
  });
  return appShell(
    ctx,
    `Notification ${n.notificationId}`,
    data,
    'activity',
    html`<p><a href="${back}">← Activity of ${data.environment.name}</a></p>
    <h1>${n.workflowId} → ${n.subscriberId}</h1>
    <p class="lead">Notification <code>${n.notificationId}</code> ${statusBadge(n.status)}</p>
    <section class="card">
      <dl class="facts">
        <dt>Workflow</dt><dd><a href="${filtered({ workflowId: n.workflowId })}">${n.workflowId}</a></dd>
        <dt>Subscriber</dt><dd><a href="${filtered({ subscriberId: n.subscriberId })}">${n.subscriberId}</a></dd>
        <dt>Transaction</dt><dd><a class="mono" href="${filtered({ transactionId: n.transactionId })}">${n.transactionId}</a></dd>
        <dt>Channels</dt><dd>${n.channels.length ? n.channels.map((channel) => html`<span class="chip">${channel}</span>`) : html`<span class="muted">none</span>`}</dd>
        <dt>Created</dt><dd>${when(n.createdAt)}</dd>
        <dt>Updated</dt><dd>${when(n.updatedAt)}</dd>
      </dl>
      <details class="raw"><summary>Payload</summary><pre>${jsonText(n.payload)}</pre></details>
    </section>
    <section class="card">
      <h2>Timeline</h2>
      ${jobs.length ? html`<ol class="timeline">${jobs}</ol>` : html`<div class="empty">No jobs yet: the fan-out has not reached this notification.</div>`}
    </section>`,
  );
}
