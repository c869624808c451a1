import { html } from './html.js';
import { appShell, when, type PageContext, type ShellData } from './views.js';

export interface InboxSettingsPageData extends ShellData {
  environments: Array<{ id: string; name: string }>;
  environmentId: string;
  origins: string[];
  /** Newest first: the first signs new tokens, every one verifies. */
  secrets: Array<{ kid: string; secret: string; createdAt: string }>;
  liveSecrets: number;
  /** The public identifier browsers send to POST /v1/inbox/session. */
  applicationIdentifier: string;
  /** Whether the environment takes sessions from a subscriber hash. */
  hashSessions: boolean;
  /** What the origins form held when it was refused. */
  originsDraft?: string;
  /** A token minted by this request for a subscriber, shown once. */
  token?: { subscriberId: string; token: string; expiresAt: string };
  subscriberDraft?: string;
  notice?: string;
  error?: string;
}

export const inboxSettingsHref = (base: string, environmentId: string) => `${base}/settings/inbox?environment=${encodeURIComponent(environmentId)}`;

export function inboxSettingsPage(ctx: PageContext, data: InboxSettingsPageData): string {
  const action = (path: string) => `${ctx.base}/settings/inbox/${path}?environment=${encodeURIComponent(data.environmentId)}`;
  const csrf = html`<input type="hidden" name="_csrf" value="${data.csrfToken}">`;
  const secrets = data.secrets.map(
    (secret, index) => html`<tr data-kid="${secret.kid}">
      <td><code>${secret.kid}</code> ${index === 0 ? html`<span class="badge active">signs new tokens</span>` : html`<span class="badge revoked">verifies only</span>`}</td>
      <td class="muted nowrap">${when(secret.createdAt)}</td>
      <td><details class="raw secret"><summary>Show secret</summary><div class="keyrow"><code id="secret-${index}">${secret.secret}</code><button class="ghost" type="button" data-copy="secret-${index}">Copy</button></div></details></td>
      <td class="actions"><form method="post" action="${action(`secrets/${encodeURIComponent(secret.kid)}/retire`)}" data-confirm="Retire ${secret.kid}? Subscriber tokens signed with it stop working at once.">${csrf}<button class="danger" type="submit">Retire</button></form></td>
    </tr>`,
  );
  return appShell(
    ctx,
    'Inbox',
    data,
    'inbox',
    html`<h1>Inbox</h1>
    <p class="lead">Who may open an environment's inbox from a browser: the origins allowed across sites, the secrets subscriber tokens are signed with, and sessions from a subscriber hash.</p>
    <nav class="tabs" aria-label="Environments">${data.environments.map(
      (e) => html`<a class="tab${e.id === data.environmentId ? ' active' : ''}" href="${inboxSettingsHref(ctx.base, e.id)}"${e.id === data.environmentId ? html` aria-current="page"` : ''}>${e.name}</a>`,
    )}</nav>
    ${data.notice ? html`<div class="notice ok" role="status">${data.notice}</div>` : ''}
    ${data.error ? html`<div class="notice bad" role="alert">${data.error}</div>` : ''}
    <section class="card">
      <h2>Allowed origins</h2>
      <p class="muted">Browsers on these origins may call <code>/v1/inbox/*</code> across sites (CORS); one a line, scheme, host and port, no path. The rest of the API never answers another origin. Empty: only pages served by Herald itself.</p>
      <form method="post" action="${action('origins')}">
        ${csrf}
        <label for="origins">Origins</label>
        <textarea id="origins" name="origins" rows="4" spellcheck="false" placeholder="https://app.example.com">${data.originsDraft ?? data.origins.join('\n')}</textarea>
        <div class="form-foot"><button class="primary" type="submit">Save origins</button></div>
      </form>
    </section>
    <section class="card">
      <h2>Signing secrets</h2>
      <p class="muted">A subscriber token is a JWT (HS256) with the header <code>kid</code> set to a secret's id, signed with the secret's bytes (base64url); <code>sub</code> the subscriberId, <code>aud</code> <code>herald-inbox</code>, <code>exp</code> at most 24 hours away. Your backend can sign its own, or call <code>POST /v1/subscribers/{subscriberId}/inbox-tokens</code>. At most ${data.liveSecrets} live: add one, move your backend to it, then retire the old one.</p>
      ${data.secrets.length === 0
        ? html`<div class="empty">No secret yet: one is made when the first token is signed, or add one now.</div>`
        : html`<table><thead><tr><th>Key id (kid)</th><th>Created</th><th>Secret</th><th></th></tr></thead><tbody>${secrets}</tbody></table>`}
      <form class="form-foot" method="post" action="${action('secrets')}"${data.secrets.length >= data.liveSecrets ? html` data-confirm="Add a secret? The oldest one is retired, and tokens signed with it stop working."` : ''}>${csrf}<button class="primary" type="submit">Add a secret</button></form>
    </section>
    <section class="card" id="sessions">
      <h2>Sessions from a subscriber hash</h2>
      <p class="muted">Novu's way: a page sends <code>POST /v1/inbox/session</code> this environment's application identifier, a subscriberId and its hash, the hex HMAC-SHA256 of the subscriberId keyed with the text of a live signing secret above, and gets a one-hour token. A hash works until its secret is retired, so prefer tokens your backend signs; turn this on for pages that cannot ask your backend, or apps moving from Novu.</p>
      <dl class="facts">
        <dt>Application identifier</dt><dd><div class="keyrow"><code id="application-identifier">${data.applicationIdentifier}</code><button class="ghost" type="button" data-copy="application-identifier">Copy</button></div></dd>
        <dt>Sessions</dt><dd>${data.hashSessions ? html`<span class="badge active" id="sessions-state">on</span>` : html`<span class="badge revoked" id="sessions-state">off</span>`}</dd>
      </dl>
      <form class="form-foot" method="post" action="${action('sessions')}"${data.hashSessions ? '' : html` data-confirm="Turn on sessions from a subscriber hash? Anyone holding a hash your backend computed can then open that subscriber's inbox until its secret is retired."`}>
        ${csrf}<input type="hidden" name="enabled" value="${data.hashSessions ? 'off' : 'on'}">
        <button class="${data.hashSessions ? 'danger' : 'primary'}" type="submit">${data.hashSessions ? 'Turn sessions off' : 'Turn sessions on'}</button>
      </form>
    </section>
    <section class="card">
      <h2>Try it</h2>
      <p class="muted">Mint a one-hour token for a subscriber of this environment and open the <a href="/examples/inbox/">example notification centre</a> with it.</p>
      ${data.token
        ? html`<section class="newkey" aria-live="polite"><h2>A token for ${data.token.subscriberId}, until ${when(data.token.expiresAt)}</h2>
        <div class="keyrow"><code id="new-token">${data.token.token}</code><button class="primary" type="button" data-copy="new-token">Copy</button></div></section>`
        : ''}
      <form class="inline" method="post" action="${action('tokens')}">
        ${csrf}
        <div><label for="token-subscriber">Subscriber</label><input id="token-subscriber" name="subscriberId" maxlength="200" required placeholder="subscriberId" value="${data.subscriberDraft ?? ''}"></div>
        <button class="ghost" type="submit">Mint a token</button>
      </form>
    </section>`,
  );
}
