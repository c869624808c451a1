// herald/client: typed fetch clients for Herald's API: createHeraldClient (a secret API key, for
// backends) and createInboxClient (a subscriber token, for browsers). Paths, parameters, bodies and
// responses all come from the contract's generated types, so a request the contract does not allow
// fails to compile.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/v1.js';
import { apiBaseUrl } from './base-url.js';

export type { components, operations, paths };
export { apiBaseUrl };
export * from './inbox.js';
export { openEventStream, EventParser, EventStreamError, type EventStream, type EventStreamOptions, type StreamEvent } from './sse.js';
export type HeraldClient = Client<paths>;

export interface HeraldClientOptions extends Omit<ClientOptions, 'baseUrl' | 'headers'> {
  /** The server, e.g. `http://localhost:3000`; `/v1` is added unless the URL already ends with it. */
  baseUrl: string;
  /** An API key (`hk_…`); it opens one environment. */
  apiKey: string;
  /** Headers sent with every request besides Authorization. */
  headers?: Record<string, string>;
}

/** An openapi-fetch client for Herald that sends `Authorization: Bearer <apiKey>` on every request. */
export function createHeraldClient({ baseUrl, apiKey, headers, ...options }: HeraldClientOptions): HeraldClient {
  return createClient<paths>({ ...options, baseUrl: apiBaseUrl(baseUrl), headers: { ...headers, Authorization: `Bearer ${apiKey}` } });
}
