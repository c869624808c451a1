// createInboxClient: one subscriber's inbox from a browser, with a subscriber token (never an API
// key): the feed, its exact counts, marking items, "mark all", and a live subscription that
// resumes where it left off. Every shape comes from the contract's Inbox operations.
import createClient, { type Client } from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/v1.js';
import { apiBaseUrl } from './base-url.js';
import { openEventStream, type EventStream, type EventStreamError } from './sse.js';

type Schemas = components['schemas'];
export type InboxItem = Schemas['InboxMessage'];
export type InboxCounts = Schemas['InboxCounts'];
export type InboxItemUpdate = Schemas['InboxMessageUpdate'];
export type InboxBulkUpdate = Schemas['InboxBulkUpdate'];
export type InboxPage = Schemas['InboxMessageList'];
export type InboxFeedQuery = NonNullable<operations['listInboxMessages']['parameters']['query']>;
/** One event of the live stream, with the sequence number (`id:`) it came with. */
export type InboxEvent = Schemas['InboxEvent'] & { id: string };
export type InboxPreferences = Schemas['WorkflowPreferenceListResponse']['data'];
export type InboxPreferencesUpdate = NonNullable<operations['updateInboxPreferences']['requestBody']>['content']['application/json'];
/** The layer a preferences update changed (the global one, or one workflow's), as it is now. */
export type InboxPreferenceUpdated = operations['updateInboxPreferences']['responses'][200]['content']['application/json']['data'];

/** A subscriber token, or a function that gives a current one (called before every request). */
export type TokenSource = string | (() => string | Promise<string>);

export interface InboxClientOptions {
  /** The Herald server, e.g. `https://herald.example.com`; `/v1` is added unless the URL ends with it. */
  baseUrl: string;
  /** A subscriber token from your backend (`POST /v1/subscribers/{id}/inbox-tokens`, or signed by it). */
  token: TokenSource;
  /** Another fetch (tests, polyfills). */
  fetch?: typeof fetch;
}

/** A refused request: Herald's error body, as a thrown error. */
export class InboxError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly body?: Schemas['Error'],
  ) {
    super(message);
    this.name = 'InboxError';
  }
}

export interface InboxSubscribeHandlers {
  /** Every event, in order: `notification.created`, `notification.updated`, `counts`, `reset`. */
  onEvent?(event: InboxEvent): void;
  /** The counts after an event that carries them (every one but `reset`). */
  onCounts?(counts: InboxCounts): void;
  /** Events were missed that the server no longer keeps: fetch the feed again. */
  onReset?(): void;
  /** Connected (again); events missed meanwhile are replayed first. */
  onOpen?(): void;
  /** The connection dropped; `retryInMs` is when it is tried again (undefined: it is not). */
  onError?(error: EventStreamError, retryInMs: number | undefined): void;
}

export interface InboxSubscribeOptions {
  /** Resume after this event id (one you kept from an earlier subscription's `lastEventId`). */
  lastEventId?: string;
  /** No byte for this long means a dead connection (the server pings every 25 s). */
  idleTimeoutMs?: number;
}

export interface InboxClient {
  /** The inbox operations as an openapi-fetch client, for anything the helpers below do not cover. */
  readonly api: Client<paths>;
  /** The newest items (archived ones left out unless asked) and the counts. */
  feed(query?: InboxFeedQuery): Promise<InboxPage>;
  counts(): Promise<InboxCounts>;
  /** Sets or clears `seen`, `read`, `archived` on one item: the item as it is now. */
  mark(messageId: string, update: InboxItemUpdate): Promise<InboxItem>;
  /** Sets or clears a state on every item up to `upTo` (the newest one shown), or on all. */
  bulk(update: InboxBulkUpdate): Promise<{ updated: number; counts: InboxCounts }>;
  /** `bulk({ set: { read: true }, upTo })`. */
  markAllRead(upTo?: string): Promise<{ updated: number; counts: InboxCounts }>;
  remove(messageId: string): Promise<void>;
  /** Records a click on the item's primary or secondary action (`done`), or undoes it. */
  act(messageId: string, action: 'primary' | 'secondary', status?: 'done' | 'pending'): Promise<InboxItem>;
  preferences(): Promise<InboxPreferences>;
  updatePreferences(update: InboxPreferencesUpdate): Promise<InboxPreferenceUpdated>;
  /** The live stream (fetch-based server-sent events, `Authorization` header, resumed with `Last-Event-ID`). */
  subscribe(handlers: InboxSubscribeHandlers, options?: InboxSubscribeOptions): EventStream;
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

async function unwrap<T>(call: Promise<Answer<T>>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) {
    const body = error as Schemas['Error'] | undefined;
    throw new InboxError(response.status, typeof body?.message === 'string' ? body.message : `Herald answered ${response.status}`, body);
  }
  return data as T;
}

export interface InboxSessionOptions {
  /** The Herald server, e.g. `https://herald.example.com`; `/v1` is added unless the URL ends with it. */
  baseUrl: string;
  /** The environment's public `applicationIdentifier` (`GET /v1/inbox/settings`, or the dashboard's Settings → Inbox). */
  applicationIdentifier: string;
  subscriberId: string;
  /** The hex HMAC-SHA256 of `subscriberId`, keyed with an inbox signing secret, from your backend. */
  subscriberHash: string;
  /** Another fetch (tests, polyfills). */
  fetch?: typeof fetch;
}

/** A subscriber token and when it expires (`POST /v1/inbox/session` and `POST /v1/subscribers/{id}/inbox-tokens` answer the same). */
export type InboxSession = Schemas['ExpiringCredential']['data'];

/**
 * Trades a Novu-style subscriber hash for a one-hour subscriber token (`POST /v1/inbox/session`),
 * which the environment must have turned on. Throws an InboxError when Herald refuses.
 */
export async function startInboxSession({ baseUrl, fetch: customFetch, ...body }: InboxSessionOptions): Promise<InboxSession> {
  const api = createClient<paths>({ baseUrl: apiBaseUrl(baseUrl), ...(customFetch ? { fetch: customFetch } : {}) });
  return (await unwrap(api.POST('/inbox/session', { body }))).data;
}

/** How long a session's token lives, read from its own claims, so a browser clock that is off does not matter. */
function lifetimeMs(session: InboxSession): number {
  try {
    const claims = JSON.parse(atob(session.token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))) as { iat?: unknown; exp?: unknown };
    if (typeof claims.iat === 'number' && typeof claims.exp === 'number') return (claims.exp - claims.iat) * 1000;
  } catch {
    // Not a JWT as Herald makes them: fall back on the local clock.
  }
  return Date.parse(session.expiresAt) - Date.now();
}

/**
 * A token source for createInboxClient from a subscriber hash: it starts a session when first
 * asked, and another a minute before that session's token expires.
 */
export function sessionTokens(options: InboxSessionOptions): () => Promise<string> {
  const RENEW_BEFORE_MS = 60_000;
  let current: Promise<{ token: string; renewAt: number }> | undefined;
  return async () => {
    const held = current && (await current.catch(() => undefined));
    if (!held || Date.now() >= held.renewAt) {
      current = startInboxSession(options).then((session) => ({ token: session.token, renewAt: Date.now() + lifetimeMs(session) - RENEW_BEFORE_MS }));
    }
    return (await current!).token;
  };
}

export function createInboxClient({ baseUrl, token, fetch: customFetch }: InboxClientOptions): InboxClient {
  const base = apiBaseUrl(baseUrl);
  const currentToken = async () => (typeof token === 'function' ? await token() : token);
  const api = createClient<paths>({ baseUrl: base, ...(customFetch ? { fetch: customFetch } : {}) });
  api.use({
    async onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${await currentToken()}`);
      return request;
    },
  });
  const item = async (call: Promise<Answer<Schemas['InboxMessageResponse']>>) => (await unwrap(call)).data;
  const bulk = async (body: InboxBulkUpdate) => (await unwrap(api.POST('/inbox/messages/bulk', { body }))).data;

  return {
    api,
    feed: (query = {}) => unwrap(api.GET('/inbox/messages', { params: { query } })),
    counts: async () => (await unwrap(api.GET('/inbox/counts'))).data,
    mark: (messageId, update) => item(api.PATCH('/inbox/messages/{messageId}', { params: { path: { messageId } }, body: update })),
    bulk,
    markAllRead: (upTo) => bulk({ set: { read: true }, ...(upTo ? { upTo } : {}) }),
    remove: async (messageId) => {
      await unwrap(api.DELETE('/inbox/messages/{messageId}', { params: { path: { messageId } } }));
    },
    act: (messageId, action, status = 'done') =>
      item(api.POST('/inbox/messages/{messageId}/actions/{actionType}', { params: { path: { messageId, actionType: action } }, body: { status } })),
    preferences: async () => (await unwrap(api.GET('/inbox/preferences'))).data,
    updatePreferences: async (update) => (await unwrap(api.PATCH('/inbox/preferences', { body: update }))).data,
    subscribe(handlers, options = {}) {
      return openEventStream({
        url: `${base}/inbox/events`,
        headers: async () => ({ Authorization: `Bearer ${await currentToken()}` }),
        lastEventId: options.lastEventId,
        idleTimeoutMs: options.idleTimeoutMs,
        // A fixed token refused once is refused forever; a token function may bring a new one.
        retryUnauthorized: typeof token === 'function',
        fetch: customFetch,
        onOpen: handlers.onOpen,
        onError: handlers.onError,
        onEvent(raw) {
          let parsed: Schemas['InboxEvent'];
          try {
            parsed = JSON.parse(raw.data) as Schemas['InboxEvent'];
          } catch {
            return; // not one of Herald's events
          }
          const event: InboxEvent = { ...parsed, id: raw.id };
          handlers.onEvent?.(event);
          if (event.counts) handlers.onCounts?.(event.counts);
          if (event.type === 'reset') handlers.onReset?.();
        },
      });
    },
  };
}
