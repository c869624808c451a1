/** The API's base URL from a server URL: one `/v1`, no trailing slash. */
export function apiBaseUrl(serverUrl: string): string {
  const trimmed = serverUrl.replace(/\/+$/, '');
  return trimmed.endsWith('/v1') ? trimmed : `${trimmed}/v1`;
}
