import type { Schemas } from '../contract.js';
import { html } from './html.js';
import { appShell, when, type PageContext, type ShellData } from './views.js';

type Endpoint = Schemas['WebhookEndpoint'];
type Delivery = Schemas['WebhookDelivery'];

export interface WebhooksShared extends ShellData {
  environments: Array<{ id: string; name: string }>;
  environmentId: string;
  notice?: string;
  error?: string;
}

export interface EndpointsPageData extends WebhooksShared {
  endpoints: Endpoint[];
  eventTypes: readonly string[];
  /** An endpoint created by this request, with its secret: the one time the page shows it unasked. */
  created?: { endpointId: string; url: string; secret: string };
  draft?: { url?: string; description?: string; eventTypes?: string[] };
}

export interface EndpointPageData extends WebhooksShared {
  endpoint: Endpoint;
  deliveries: { data: Delivery[]; totalCount: number };
  filters: { status?: string; eventType?: string };
  eventTypes: readonly string[];
  /** The secret, when asked for (Show secret) or just rotated. */
  secret?: { secret: string; previousSecretExpiresAt?: string; rotated: boolean };
}

const q = (environmentId: string) => `environment=${encodeURIComponent(environmentId)}`;
export const webhooksHref = (base: string, environmentId: string) => `${base}/webhooks?${q(environmentId)}`;
export const endpointHref = (base: string, environmentId: string, endpointId: string) => `${base}/webhooks/${encodeURIComponent(endpointId)}?${q(environmentId)}`;

function notices(data: WebhooksShared) {
  return html`${data.notice ? html`<div class="notice ok" role="status">${data.notice}</div>` : ''}
    ${data.error ? html`<div class="notice bad" role="alert">${data.error}</div>` : ''}`;
}

function endpointState(endpoint: Endpoint) {
  if (endpoint.disabled) return html`<span class="badge status-failed" title="${endpoint.disabledReason ?? ''}">disabled</span>`;
  if (endpoint.failingSince) return html`<span class="badge status-warning">failing since ${when(endpoint.failingSince)}</span>`;
  return html`<span class="badge status-completed">enabled</span>`;
}

const typesOf = (endpoint: Endpoint) => (endpoint.eventTypes ? endpoint.eventTypes.map((type) => html`<span class="chip">${type}</span>`) : html`<span class="muted">every event</span>`);

export function endpointsPage(ctx: PageContext, data: EndpointsPageData): string {
  const csrf = html`<input type="hidden" name="_csrf" value="${data.csrfToken}">`;
  const rows = data.endpoints.map(
    (endpoint) => html`<tr data-endpoint-id="${endpoint.endpointId}">
      <td><a href="${endpointHref(ctx.base, data.environmentId, endpoint.endpointId)}"><code>${endpoint.url}</code></a>${endpoint.description ? html`<div class="muted">${endpoint.description}</div>` : ''}</td>
      <td>${typesOf(endpoint)}</td>
      <td>${endpointState(endpoint)}</td>
      <td class="muted nowrap">${when(endpoint.createdAt)}</td>
    </tr>`,
  );
  const chosen = new Set(data.draft?.eventTypes ?? []);
  return appShell(
    ctx,
    'Webhooks',
    data,
    'webhooks',
    html`<h1>Webhooks</h1>
    <p class="lead">Herald POSTs each event to these endpoints, signed the Standard Webhooks way (<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>).</p>
    <nav class="tabs" aria-label="Environments">${data.environments.map(
      (e) => html`<a class="tab${e.id === data.environmentId ? ' active' : ''}" href="${webhooksHref(ctx.base, e.id)}"${e.id === data.environmentId ? html` aria-current="page"` : ''}>${e.name}</a>`,
    )}</nav>
    ${data.created
      ? html`<section class="newkey" aria-live="polite"><h2>The signing secret of ${data.created.url}</h2>
      <div>Verify each delivery with it. The endpoint's page shows it again when you ask.</div>
      <div class="keyrow"><code id="new-secret">${data.created.secret}</code><button class="primary" type="button" data-copy="new-secret">Copy</button></div>
      <p><a href="${endpointHref(ctx.base, data.environmentId, data.created.endpointId)}">Open the endpoint</a></p></section>`
      : ''}
    ${notices(data)}
    <section class="card">
      <h2>Endpoints</h2>
      ${data.endpoints.length === 0
        ? html`<div class="empty">No endpoints yet.</div>`
        : html`<table><thead><tr><th>URL</th><th>Events</th><th>State</th><th>Created</th></tr></thead><tbody>${rows}</tbody></table>`}
    </section>
    <section class="card">
      <h2>Add an endpoint</h2>
      <form method="post" action="${ctx.base}/webhooks?${q(data.environmentId)}">
        ${csrf}
        <div class="form-row"><label for="endpoint-url">URL</label><input id="endpoint-url" name="url" type="url" required maxlength="2048" placeholder="https://api.example.com/herald/webhooks" value="${data.draft?.url ?? ''}"></div>
        <div class="form-row"><label for="endpoint-description">Description</label><input id="endpoint-description" name="description" maxlength="500" value="${data.draft?.description ?? ''}"></div>
        <fieldset class="event-types"><legend>Events (none ticked: every event)</legend>${data.eventTypes.map(
          (type) => html`<label class="check"><input type="checkbox" name="eventTypes" value="${type}"${chosen.has(type) ? html` checked` : ''}> ${type}</label>`,
        )}</fieldset>
        <button class="primary" type="submit">Add endpoint</button>
      </form>
    </section>`,
  );
}

const deliveryBadge = (status: string) => html`<span class="badge status-${status === 'succeeded' ? 'completed' : status}">${status}</span>`;

export function endpointPage(ctx: PageContext, data: EndpointPageData): string {
  const { endpoint } = data;
  const csrf = html`<input type="hidden" name="_csrf" value="${data.csrfToken}">`;
  const action = (path: string) => `${ctx.base}/webhooks/${encodeURIComponent(endpoint.endpointId)}/${path}?${q(data.environmentId)}`;
  const deliveries = data.deliveries.data.map(
    (delivery) => html`<tr data-delivery-id="${delivery.deliveryId}">
      <td class="nowrap">${when(delivery.createdAt)}</td>
      <td><span class="chip">${delivery.eventType}</span><div class="muted mono">${delivery.eventId}</div></td>
      <td>${deliveryBadge(delivery.status)}${delivery.nextAttemptAt ? html`<div class="muted">next try ${when(delivery.nextAttemptAt)}</div>` : ''}</td>
      <td>${delivery.attempts.length === 0
        ? html`<span class="muted">not tried yet</span>`
        : html`<details class="raw attempts"><summary>${delivery.attempts.length} tr${delivery.attempts.length === 1 ? 'y' : 'ies'}, last ${delivery.attempts.at(-1)!.statusCode ?? 'no answer'}</summary><ol class="details">${delivery.attempts.map(
            (a) => html`<li class="detail"><div class="detail-head"><b>#${a.attempt}</b><span class="chip">${a.trigger}</span><span>${a.statusCode ?? 'no answer'}</span><span class="muted">${a.durationMs} ms · ${when(a.createdAt)}</span></div>
              ${a.error ? html`<div class="detail-text">${a.error}</div>` : ''}${a.response ? html`<pre>${a.response}</pre>` : ''}</li>`,
          )}</ol></details>`}</td>
      <td class="actions"><form method="post" action="${ctx.base}/webhooks/deliveries/${encodeURIComponent(delivery.deliveryId)}/retry?${q(data.environmentId)}">${csrf}<button class="ghost small" type="submit">Retry</button></form></td>
    </tr>`,
  );
  const option = (value: string, selected: string | undefined) => html`<option value="${value}"${value === selected ? html` selected` : ''}>${value}</option>`;
  return appShell(
    ctx,
    `Webhook ${endpoint.url}`,
    data,
    'webhooks',
    html`<p><a href="${webhooksHref(ctx.base, data.environmentId)}">← Webhooks</a></p>
    <h1 class="mono endpoint-url">${endpoint.url}</h1>
    <p class="lead">${endpoint.description ?? ''} ${endpointState(endpoint)}</p>
    ${endpoint.disabledReason ? html`<div class="notice bad">Herald disabled this endpoint: ${endpoint.disabledReason}</div>` : ''}
    ${notices(data)}
    <section class="card">
      <dl class="facts">
        <dt>Endpoint</dt><dd><code>${endpoint.endpointId}</code></dd>
        <dt>Events</dt><dd>${typesOf(endpoint)}</dd>
        <dt>Rate limit</dt><dd>${endpoint.rateLimitPerSecond ? `${endpoint.rateLimitPerSecond} a second` : html`<span class="muted">none</span>`}</dd>
        <dt>Content</dt><dd>${endpoint.includeContent ? 'rendered content included' : html`<span class="muted">ids and states only</span>`}</dd>
        <dt>Created</dt><dd>${when(endpoint.createdAt)}</dd>
      </dl>
      <div class="button-row">
        <form method="post" action="${action('test')}">${csrf}<button class="primary" type="submit">Send a test event</button></form>
        <form method="post" action="${action(endpoint.disabled ? 'enable' : 'disable')}">${csrf}<button class="ghost" type="submit">${endpoint.disabled ? 'Enable' : 'Disable'}</button></form>
        <form method="post" action="${action('delete')}" data-confirm="Delete this endpoint? Herald stops sending to it, and its deliveries are gone.">${csrf}<button class="danger" type="submit">Delete</button></form>
      </div>
    </section>
    <section class="card">
      <h2>Signing secret</h2>
      ${data.secret
        ? html`<div class="keyrow"><code id="endpoint-secret">${data.secret.secret}</code><button class="primary" type="button" data-copy="endpoint-secret">Copy</button></div>
        ${data.secret.previousSecretExpiresAt ? html`<p class="muted">Until ${when(data.secret.previousSecretExpiresAt)} each delivery carries a signature with the previous secret too.</p>` : ''}`
        : html`<form method="post" action="${action('secret')}">${csrf}<button class="ghost" type="submit">Show secret</button></form>`}
      <form class="inline form-foot" method="post" action="${action('rotate')}" data-confirm="Rotate the secret? Deliveries are signed with the new one from now on.">
        ${csrf}
        <div><label for="grace">Keep signing with the old secret for</label><select id="grace" name="gracePeriodSeconds">
          <option value="86400" selected>24 hours</option><option value="3600">1 hour</option><option value="0">no time: stop at once</option></select></div>
        <button class="ghost" type="submit">Rotate secret</button>
      </form>
    </section>
    <section class="card">
      <h2>Recent deliveries <span class="muted">(${data.deliveries.totalCount})</span></h2>
      <form class="filters" method="get" action="${ctx.base}/webhooks/${encodeURIComponent(endpoint.endpointId)}">
        <input type="hidden" name="environment" value="${data.environmentId}">
        <div><label for="d-status">Status</label><select id="d-status" name="status"><option value="">any</option>${['pending', 'succeeded', 'failed'].map((s) => option(s, data.filters.status))}</select></div>
        <div><label for="d-type">Event</label><select id="d-type" name="eventType"><option value="">any</option>${data.eventTypes.map((type) => option(type, data.filters.eventType))}</select></div>
        <div class="filter-buttons"><button class="primary" type="submit">Filter</button></div>
      </form>
      ${deliveries.length === 0
        ? html`<div class="empty">No deliveries${data.filters.status || data.filters.eventType ? ' match' : ' yet'}.</div>`
        : html`<table class="deliveries"><thead><tr><th>Created</th><th>Event</th><th>Status</th><th>Tries</th><th></th></tr></thead><tbody>${deliveries}</tbody></table>`}
    </section>`,
  );
}
