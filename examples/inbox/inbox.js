// The example notification centre: herald/client's browser module (createInboxClient) and the DOM,
// nothing else. Everything an item says is put in the page as text, never as markup.
import { createInboxClient } from './herald-client.js';

const TOKEN_KEY = 'herald-inbox-token';
const PAGE_SIZE = 20;
const $ = (id) => document.getElementById(id);

/** What the page shows: the items newest first, the counts, and the live stream. */
const state = { client: undefined, stream: undefined, items: [], counts: undefined, hasMore: false, firstEvent: true };

const newestFirst = (a, b) => (a.createdAt === b.createdAt ? (a.messageId < b.messageId ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1);

/** Adds or replaces items by id; archived ones leave the list (it shows the inbox, not the archive). */
function upsert(items) {
  const byId = new Map(state.items.map((item) => [item.messageId, item]));
  for (const item of items) {
    if (item.archivedAt) byId.delete(item.messageId);
    else byId.set(item.messageId, item);
  }
  state.items = [...byId.values()].sort(newestFirst);
}

function setCounts(counts) {
  state.counts = counts;
  const badge = $('unread-count');
  badge.textContent = String(counts.unread);
  badge.dataset.count = String(counts.unread);
  document.title = counts.unread > 0 ? `(${counts.unread}) Notification centre` : 'Notification centre';
  $('totals').textContent = `${counts.unread} unread of ${counts.total}`;
  $('mark-all').disabled = counts.unread === 0;
}

function setStatus(text, live = false) {
  $('status').textContent = text;
  $('status').classList.toggle('live', live);
}

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
function ago(iso) {
  const seconds = Math.round((Date.parse(iso) - Date.now()) / 1000);
  const [amount, unit] = Math.abs(seconds) < 60 ? [seconds, 'second'] : Math.abs(seconds) < 3600 ? [Math.round(seconds / 60), 'minute'] : Math.abs(seconds) < 86400 ? [Math.round(seconds / 3600), 'hour'] : [Math.round(seconds / 86400), 'day'];
  return relative.format(amount, unit);
}

/** A URL from a message, only if it is a web address (no `javascript:` links). */
function safeUrl(url) {
  try {
    const parsed = new URL(url, location.href);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderItem(item) {
  const li = element('li', `item${item.readAt ? '' : ' unread'}`);
  li.dataset.messageId = item.messageId;
  li.append(element('span', 'dot'));
  const avatar = item.avatar && safeUrl(item.avatar);
  if (avatar) {
    const img = element('img');
    img.src = avatar;
    img.alt = '';
    li.append(img);
  }
  const text = element('div', 'text');
  if (item.subject) text.append(element('div', 'subject', item.subject));
  text.append(element('div', 'body', item.body));
  const actions = element('div', 'actions');
  for (const [name, action] of [['primary', item.primaryAction], ['secondary', item.secondaryAction]]) {
    if (!action) continue;
    const button = element('button', `action-${name}`, action.label);
    button.type = 'button';
    button.addEventListener('click', (event) => {
      event.stopPropagation();
      void run(async () => {
        upsert([await state.client.act(item.messageId, name)]);
        render();
        const url = action.url && safeUrl(action.url);
        if (url) window.open(url, '_blank', 'noopener');
      });
    });
    actions.append(button);
  }
  if (actions.childElementCount) text.append(actions);
  const meta = element('div', 'meta');
  meta.append(element('time', '', ago(item.createdAt)));
  if (!item.readAt) {
    const markRead = element('button', 'link mark-read', 'Mark read');
    markRead.type = 'button';
    markRead.addEventListener('click', (event) => {
      event.stopPropagation();
      void read(item);
    });
    meta.append(markRead);
  }
  text.append(meta);
  li.append(text);
  li.addEventListener('click', () => {
    void read(item).then(() => {
      const url = item.redirect?.url && safeUrl(item.redirect.url);
      if (url) window.open(url, '_blank', 'noopener');
    });
  });
  return li;
}

function render() {
  $('items').replaceChildren(...state.items.map(renderItem));
  $('empty').hidden = state.items.length > 0;
  $('more').hidden = !state.hasMore;
}

/** Runs a change, showing its error (an expired token, say) instead of failing silently. */
async function run(change) {
  $('error').hidden = true;
  try {
    await change();
  } catch (error) {
    $('error').textContent = error.statusCode === 401 ? 'The token expired or is not valid: paste a new one.' : `Herald said: ${error.message}`;
    $('error').hidden = false;
  }
}

async function read(item) {
  if (item.readAt) return;
  await run(async () => {
    upsert([await state.client.mark(item.messageId, { read: true })]);
    render();
  });
}

async function loadFeed() {
  const page = await state.client.feed({ limit: PAGE_SIZE });
  upsert(page.data);
  state.hasMore = page.hasMore;
  setCounts(page.counts);
  render();
}

async function open(token) {
  state.client = createInboxClient({ baseUrl: location.origin, token });
  state.items = [];
  state.firstEvent = true;
  $('connect').hidden = true;
  $('signed-in').hidden = false;
  $('bell').disabled = false;
  setStatus('connecting…');
  // The stream opens first and the list is read after, so nothing that arrives in between is
  // missed: an item in both is shown once.
  state.stream = state.client.subscribe({
    onOpen: () => setStatus('live', true),
    onError: (error, retryInMs) => setStatus(retryInMs === undefined ? `stopped: ${error.message}` : 'reconnecting…'),
    onCounts: setCounts,
    onReset: () => void run(async () => {
      state.items = [];
      await loadFeed();
    }),
    onEvent(event) {
      // A new stream begins with the counts as they are; later `counts` events are bulk changes.
      const initial = state.firstEvent && event.type === 'counts';
      state.firstEvent = false;
      if (initial) return;
      if (event.type === 'notification.created' && event.item) upsert([event.item]);
      else if (event.type === 'notification.updated' && event.deleted) state.items = state.items.filter((item) => item.messageId !== event.messageId);
      else if (event.type === 'notification.updated' && event.item) upsert([event.item]);
      else if (event.type === 'counts') void run(loadFeed); // a bulk change: states of many items changed
      render();
    },
  });
  await run(loadFeed);
}

function close() {
  state.stream?.close();
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
}

$('origin').textContent = location.origin;
$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const token = $('token').value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  $('token').value = '';
  void open(token);
});
$('forget').addEventListener('click', close);
$('bell').addEventListener('click', () => {
  const panel = $('panel');
  panel.hidden = !panel.hidden;
  $('bell').setAttribute('aria-expanded', String(!panel.hidden));
});
$('mark-all').addEventListener('click', () =>
  void run(async () => {
    // Up to the newest item shown: one that arrives during the call stays unread.
    const upTo = state.items[0]?.messageId;
    const { counts } = await state.client.markAllRead(upTo);
    const now = new Date().toISOString();
    upsert(state.items.map((item) => (item.readAt ? item : { ...item, readAt: now, seenAt: item.seenAt ?? now })));
    setCounts(counts);
    render();
  }),
);
$('more').addEventListener('click', () =>
  void run(async () => {
    const page = await state.client.feed({ limit: PAGE_SIZE, before: state.items.at(-1)?.messageId });
    upsert(page.data);
    state.hasMore = page.hasMore;
    render();
  }),
);

const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) void open(saved);
