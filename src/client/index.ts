// herald/client: a typed fetch client for Herald's API, for frontend and backend teams alike.
// Paths, parameters, bodies and responses all come from the contract's generated types, so a
// request the contract does not allow fails to compile.
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/v1.js';

export type { components, operations, paths };
export type HeraldClient = Client<paths>;

export interface HeraldClientOptions extends Omit<ClientOptions, 'baseUrl' | 'headers'> {
  /** The server, e.g. `http://localhost:3000`; `/v1` is added unless the URL already ends with it. */
  baseUrl: string;
  /** An API key (`hk_…`); it opens one environment. */
  apiKey: string;
  /** Headers sent with every request besides Authorization. */
  headers?: Record<string, string>;
}

/** The API's base URL from a server URL: one `/v1`, no trailing slash. */
export function apiBaseUrl(serverUrl: string): string {
  const trimmed = serverUrl.replace(/\/+$/, '');
  return trimmed.endsWith('/v1') ? trimmed : `${trimmed}/v1`;
}

/** An openapi-fetch client for Herald that sends `Authorization: Bearer <apiKey>` on every request. */
export function createHeraldClient({ baseUrl, apiKey, headers, ...options }: HeraldClientOptions): HeraldClient {
  return createClient<paths>({ ...options, baseUrl: apiBaseUrl(baseUrl), headers: { ...headers, Authorization: `Bearer ${apiKey}` } });
}
