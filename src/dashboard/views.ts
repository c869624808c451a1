import { html, SafeHtml } from './html.js';

// The style and script below are ours and trusted; they go into the page unescaped, allowed by a
// per-response CSP nonce, so no other inline script or style can run.

const STYLE = `
:root { --ink:#1c2030; --muted:#667085; --line:#e4e7ec; --bg:#f5f6fa; --card:#fff; --brand:#4f46e5;
  --brand-dark:#4338ca; --ok:#067647; --ok-bg:#ecfdf3; --bad:#b42318; --bad-bg:#fef3f2; --warn-bg:#fffaeb; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--ink); background:var(--bg); overflow-wrap:anywhere; }
a { color:var(--brand); }
code, .mono { font-family: ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:13px; }
.topbar { display:flex; align-items:center; justify-content:space-between; padding:0 28px; height:60px;
  background:var(--card); border-bottom:1px solid var(--line); }
.brand { display:flex; align-items:center; gap:10px; font-weight:700; font-size:17px; letter-spacing:-.01em; color:var(--ink); text-decoration:none; }
.logo { width:28px; height:28px; border-radius:8px; background:linear-gradient(135deg,#6366f1,#8b5cf6);
  display:grid; place-items:center; color:#fff; font-size:15px; }
.who { display:flex; align-items:center; gap:14px; color:var(--muted); font-size:14px; }
.org { color:var(--ink); font-weight:600; }
.shell { display:flex; max-width:1180px; margin:0 auto; padding:32px 28px; gap:32px; }
nav.side { width:200px; flex-shrink:0; }
nav.side h4 { margin:18px 0 8px; font-size:12px; text-transform:uppercase; letter-spacing:.06em; color:var(--muted); }
nav.side a { display:block; padding:7px 10px; border-radius:8px; color:var(--ink); text-decoration:none; font-weight:500; }
nav.side h4:first-child { margin-top:0; }
nav.side a.active { background:#eef2ff; color:var(--brand-dark); }
main { flex:1; min-width:0; }
h1 { font-size:24px; margin:0 0 4px; letter-spacing:-.02em; }
.lead { color:var(--muted); margin:0 0 24px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:12px; box-shadow:0 1px 2px rgba(16,24,40,.05);
  padding:20px 24px; margin-bottom:20px; }
.card h2 { font-size:16px; margin:0 0 14px; }
.envs { display:flex; gap:12px; flex-wrap:wrap; }
.env-card { border:1px solid var(--line); border-radius:10px; padding:10px 14px; min-width:180px; }
.env-card b { display:block; text-transform:capitalize; }
.env-card span { color:var(--muted); font-size:13px; }
.nowrap { white-space:nowrap; }
form.inline { display:flex; gap:10px; align-items:flex-end; flex-wrap:wrap; }
label { display:block; font-size:13px; font-weight:600; margin-bottom:6px; }
input, select { font:inherit; padding:9px 12px; border:1px solid #d0d5dd; border-radius:8px; background:#fff; min-width:220px; }
input:focus, select:focus { outline:2px solid #c7d2fe; border-color:var(--brand); }
button { font:inherit; font-weight:600; border-radius:8px; padding:9px 16px; cursor:pointer; border:1px solid transparent; }
.primary { background:var(--brand); color:#fff; }
.primary:hover { background:var(--brand-dark); }
.ghost { background:#fff; color:var(--ink); border-color:#d0d5dd; }
.danger { background:#fff; color:var(--bad); border-color:#fda29b; padding:5px 12px; font-size:13px; }
.danger:hover { background:var(--bad-bg); }
table { width:100%; border-collapse:collapse; }
th { text-align:left; font-size:12px; text-transform:uppercase; letter-spacing:.05em; color:var(--muted); font-weight:600;
  padding:8px 10px; border-bottom:1px solid var(--line); }
td { padding:12px 10px; border-bottom:1px solid var(--line); vertical-align:middle; }
tr:last-child td { border-bottom:0; }
.badge { display:inline-block; padding:2px 9px; border-radius:999px; font-size:12px; font-weight:600; }
.badge.active { color:var(--ok); background:var(--ok-bg); }
.badge.revoked { color:var(--muted); background:#f2f4f7; }
.badge.env { color:#3538cd; background:#eef4ff; text-transform:capitalize; }
.muted { color:var(--muted); }
.notice { border-radius:10px; padding:14px 18px; margin-bottom:20px; border:1px solid; }
.notice.ok { background:var(--ok-bg); border-color:#abefc6; }
.notice.bad { background:var(--bad-bg); border-color:#fecdca; color:var(--bad); }
.newkey { background:var(--warn-bg); border:1px solid #fedf89; border-radius:12px; padding:18px 22px; margin-bottom:20px; }
.newkey h2 { margin:0 0 6px; font-size:16px; }
.keyrow { display:flex; gap:10px; align-items:center; margin-top:12px; }
.keyrow code { flex:1; background:#fff; border:1px solid var(--line); border-radius:8px; padding:10px 12px; overflow-x:auto; white-space:nowrap; }
.center { min-height:100vh; display:grid; place-items:center; padding:24px; }
.signin { width:100%; max-width:400px; }
.signin .brand { justify-content:center; margin-bottom:24px; font-size:20px; }
.signin .card { padding:28px; }
.signin input { width:100%; margin-bottom:16px; }
.signin button { width:100%; }
.hint { text-align:center; font-size:13px; color:var(--muted); }
.actions { text-align:right; }
.empty { text-align:center; padding:28px; color:var(--muted); }
textarea { font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; width:100%; padding:9px 12px; border:1px solid #d0d5dd; border-radius:8px; }
.form-foot { margin-top:12px; }
.form-row { margin-bottom:12px; }
.form-row input { width:100%; max-width:560px; }
fieldset.event-types { border:1px solid var(--line); border-radius:8px; padding:10px 14px; margin:0 0 14px; display:flex; flex-wrap:wrap; gap:6px 18px; }
fieldset.event-types legend { font-size:13px; font-weight:600; padding:0 4px; }
label.check { display:inline-flex; gap:6px; align-items:center; font-weight:500; font-family:ui-monospace,Menlo,Consolas,monospace; font-size:12.5px; margin:0; }
label.check input { min-width:0; }
.button-row { display:flex; gap:10px; flex-wrap:wrap; margin-top:10px; }
button.small { padding:4px 10px; font-size:13px; }
h1.endpoint-url { font-size:18px; word-break:break-all; }
table.deliveries td { vertical-align:top; font-size:14px; }
details.attempts pre { max-height:160px; }
details.secret .keyrow { margin-top:6px; }
details.secret code { max-width:420px; }
a.button { display:inline-block; font-weight:600; border-radius:8px; padding:8px 14px; text-decoration:none; border:1px solid #d0d5dd; }
.tabs { display:flex; gap:6px; margin-bottom:16px; }
.tab { padding:6px 14px; border-radius:999px; border:1px solid var(--line); background:var(--card); color:var(--ink); text-decoration:none; text-transform:capitalize; font-weight:500; }
.tab.active { background:#eef2ff; border-color:#c7d2fe; color:var(--brand-dark); }
form.filters { display:flex; gap:12px; flex-wrap:wrap; align-items:flex-end; }
form.filters input, form.filters select { min-width:0; width:150px; }
.filter-buttons { display:flex; gap:8px; }
table.activity td { padding:9px 10px; font-size:14px; }
.filter-link { color:var(--ink); text-decoration:none; border-bottom:1px dotted #98a2b3; }
.chip { display:inline-block; padding:1px 8px; margin:0 4px 0 0; border-radius:6px; background:#f2f4f7; font-size:12px; color:#344054; }
.badge.status-completed, .badge.status-success { color:var(--ok); background:var(--ok-bg); }
.badge.status-failed { color:var(--bad); background:var(--bad-bg); }
.badge.status-warning, .badge.status-skipped, .badge.status-canceled, .badge.status-merged { color:#93370d; background:var(--warn-bg); }
.badge.status-pending, .badge.status-queued, .badge.status-delayed, .badge.status-processing, .badge.status-running { color:#175cd3; background:#eff8ff; }
.pager { display:flex; gap:10px; align-items:center; justify-content:flex-end; margin-top:14px; }
dl.facts { display:grid; grid-template-columns:140px 1fr; gap:8px 16px; margin:0 0 12px; }
dl.facts dt { color:var(--muted); font-size:13px; font-weight:600; }
dl.facts dd { margin:0; }
details.raw summary { cursor:pointer; color:var(--brand); font-size:13px; font-weight:600; }
details.raw pre { background:#0f172a; color:#e2e8f0; border-radius:8px; padding:12px 14px; overflow:auto; max-height:360px; font-size:12.5px; white-space:pre-wrap; word-break:break-word; }
ol.timeline { list-style:none; margin:0; padding:0; }
li.job { border-left:2px solid var(--line); padding:0 0 18px 22px; position:relative; }
li.job:last-child { padding-bottom:0; }
.job-head { display:flex; gap:8px; align-items:center; flex-wrap:wrap; }
.step-no { position:absolute; left:-13px; width:24px; height:24px; border-radius:50%; background:var(--brand); color:#fff; font-size:12px; font-weight:700; display:grid; place-items:center; }
ol.details { list-style:none; margin:10px 0 0; padding:0; }
li.detail { border:1px solid var(--line); border-radius:10px; padding:8px 12px; margin-bottom:8px; }
li.detail-failed { border-color:#fecdca; }
.detail-head { display:flex; gap:8px; align-items:center; font-size:13px; }
.detail-text { margin-top:4px; }
.detail-none { margin-top:8px; font-size:13px; }
`;

const SCRIPT = `
for (const button of document.querySelectorAll('[data-copy]')) {
  button.addEventListener('click', async () => {
    const text = document.getElementById(button.dataset.copy).textContent;
    try { await navigator.clipboard.writeText(text); }
    catch { const range = document.createRange(); range.selectNodeContents(document.getElementById(button.dataset.copy));
      const selection = getSelection(); selection.removeAllRanges(); selection.addRange(range); document.execCommand('copy'); }
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
  });
}
for (const form of document.querySelectorAll('form[data-confirm]')) {
  form.addEventListener('submit', (event) => { if (!confirm(form.dataset.confirm)) event.preventDefault(); });
}
`;

export interface PageContext {
  /** The per-response nonce the Content-Security-Policy allows for the inline style and script. */
  nonce: string;
  /** Where the dashboard is mounted, e.g. "/dashboard". */
  base: string;
}

export function layout(ctx: PageContext, title: string, body: SafeHtml): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Herald</title>
<style nonce="${ctx.nonce}">${new SafeHtml(STYLE)}</style>
</head>
<body>
${body}
<script nonce="${ctx.nonce}">${new SafeHtml(SCRIPT)}</script>
</body>
</html>
`.value;
}

export const brand = (base: string) => html`<a class="brand" href="${base}"><span class="logo">◆</span>Herald</a>`;

export function signInPage(ctx: PageContext, form: { csrfToken: string; email?: string; error?: string }): string {
  return layout(
    ctx,
    'Sign in',
    html`<div class="center"><div class="signin">
  ${brand(ctx.base)}
  <div class="card">
    <h1>Sign in</h1>
    <p class="lead">Manage your organization's API keys.</p>
    ${form.error ? html`<div class="notice bad" role="alert">${form.error}</div>` : ''}
    <form method="post" action="${ctx.base}/sign-in">
      <input type="hidden" name="_csrf" value="${form.csrfToken}">
      <label for="email">Email</label>
      <input id="email" name="email" type="email" autocomplete="username" required value="${form.email ?? ''}">
      <label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required>
      <button class="primary" type="submit">Sign in</button>
    </form>
  </div>
  <p class="hint">No account? The server's operator creates one with
  <code>npm run keys -- owner --email you@example.com</code>.</p>
</div></div>`,
  );
}

export interface KeysPageData extends ShellData {
  environments: Array<{ id: string; name: string }>;
  keys: Array<{ id: string; name: string; prefix: string; environmentName: string; createdAt: string; revokedAt: string | null }>;
  /** A key created by this request, in clear: the only time it is shown. */
  newKey?: { key: string; name: string; environmentName: string };
  notice?: string;
  error?: string;
  /** What the create form held, so a rejected form keeps it. */
  draft?: { name?: string; environmentId?: string };
}

export const when = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;

/** Who is signed in, as every page after sign-in shows it. */
export interface ShellData {
  organizationName: string;
  email: string;
  csrfToken: string;
}

/** The pages of the side navigation, by section; `active` is the one shown. */
const NAV: Array<{ section: string; pages: Array<{ id: string; path: string; label: string }> }> = [
  {
    section: 'Monitor',
    pages: [
      { id: 'activity', path: '/activity', label: 'Activity' },
      { id: 'webhooks', path: '/webhooks', label: 'Webhooks' },
    ],
  },
  {
    section: 'Settings',
    pages: [
      { id: 'api-keys', path: '/settings/api-keys', label: 'API keys' },
      { id: 'inbox', path: '/settings/inbox', label: 'Inbox' },
    ],
  },
];

/** A signed-in page: the top bar (organization, owner, sign out), the side navigation, the page. */
export function appShell(ctx: PageContext, title: string, data: ShellData, active: string, main: SafeHtml): string {
  return layout(
    ctx,
    title,
    html`<header class="topbar">
  ${brand(ctx.base)}
  <div class="who"><span class="org">${data.organizationName}</span><span>${data.email}</span>
    <form method="post" action="${ctx.base}/sign-out"><input type="hidden" name="_csrf" value="${data.csrfToken}"><button class="ghost" type="submit">Sign out</button></form>
  </div>
</header>
<div class="shell">
  <nav class="side">${NAV.map(
    ({ section, pages }) =>
      html`<h4>${section}</h4>${pages.map((page) => html`<a${page.id === active ? html` class="active" aria-current="page"` : ''} href="${ctx.base}${page.path}">${page.label}</a>`)}`,
  )}</nav>
  <main>${main}</main>
</div>`,
  );
}

export function apiKeysPage(ctx: PageContext, data: KeysPageData): string {
  const activeByEnvironment = new Map<string, number>();
  for (const key of data.keys) if (!key.revokedAt) activeByEnvironment.set(key.environmentName, (activeByEnvironment.get(key.environmentName) ?? 0) + 1);
  const rows = data.keys.map(
    (key) => html`<tr data-key-id="${key.id}">
      <td><strong>${key.name}</strong></td>
      <td><code>${key.prefix}…</code></td>
      <td><span class="badge env">${key.environmentName}</span></td>
      <td class="muted nowrap">${when(key.createdAt)}</td>
      <td>${key.revokedAt ? html`<span class="badge revoked" title="${when(key.revokedAt)}">Revoked</span>` : html`<span class="badge active">Active</span>`}</td>
      <td class="actions">${
        key.revokedAt
          ? ''
          : html`<form method="post" action="${ctx.base}/settings/api-keys/${key.id}/revoke" data-confirm="Revoke ${key.name}? Requests with it will be refused at once.">
          <input type="hidden" name="_csrf" value="${data.csrfToken}">
          <button class="danger" type="submit">Revoke</button>
        </form>`
      }</td>
    </tr>`,
  );
  return appShell(
    ctx,
    'API keys',
    data,
    'api-keys',
    html`
    <h1>API keys</h1>
    <p class="lead">A key opens one environment. Send it as <code>Authorization: Bearer &lt;key&gt;</code>; revoke a key and it is refused at once.</p>
    ${data.newKey
      ? html`<section class="newkey" aria-live="polite">
      <h2>Your new key “${data.newKey.name}” for ${data.newKey.environmentName}</h2>
      <div>Copy it now: it is shown only once, and Herald keeps only its hash.</div>
      <div class="keyrow"><code id="new-key">${data.newKey.key}</code><button class="primary" type="button" data-copy="new-key">Copy</button></div>
    </section>`
      : ''}
    ${data.notice ? html`<div class="notice ok" role="status">${data.notice}</div>` : ''}
    ${data.error ? html`<div class="notice bad" role="alert">${data.error}</div>` : ''}
    <section class="card">
      <h2>Environments</h2>
      <div class="envs">${data.environments.map(
        (environment) => html`<div class="env-card"><b>${environment.name}</b><span>${activeByEnvironment.get(environment.name) ?? 0} active key(s) · <code>${environment.id}</code></span></div>`,
      )}</div>
    </section>
    <section class="card">
      <h2>Create a key</h2>
      <form class="inline" method="post" action="${ctx.base}/settings/api-keys">
        <input type="hidden" name="_csrf" value="${data.csrfToken}">
        <div><label for="key-name">Name</label><input id="key-name" name="name" maxlength="100" required placeholder="e.g. Backend, staging" value="${data.draft?.name ?? ''}"></div>
        <div><label for="key-environment">Environment</label><select id="key-environment" name="environmentId">${data.environments.map(
          (environment) => html`<option value="${environment.id}"${environment.id === data.draft?.environmentId ? html` selected` : ''}>${environment.name}</option>`,
        )}</select></div>
        <button class="primary" type="submit">Create key</button>
      </form>
    </section>
    <section class="card">
      <h2>Keys</h2>
      ${data.keys.length === 0
        ? html`<div class="empty">No keys yet.</div>`
        : html`<table><thead><tr><th>Name</th><th>Prefix</th><th>Environment</th><th>Created</th><th>Status</th><th></th></tr></thead><tbody>${rows}</tbody></table>`}
    </section>
`,
  );
}

/** A page that only says something: a refused form, too many attempts, a page that is not there. */
export function messagePage(ctx: PageContext, title: string, message: string, link?: { href: string; text: string }): string {
  return layout(
    ctx,
    title,
    html`<div class="center"><div class="signin">
  ${brand(ctx.base)}
  <div class="card"><h1>${title}</h1><p class="lead">${message}</p>${link ? html`<a href="${link.href}">${link.text}</a>` : ''}</div>
</div></div>`,
  );
}
