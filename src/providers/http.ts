import { ProviderError, type Delivery } from './types.js';

const TIMEOUT_MS = 10_000;
const RAW_LIMIT = 500;

export interface HttpRequest {
  url: string;
  body: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/**
 * POSTs to a provider and sorts the outcome: 2xx is sent; a timeout, a network error, 408, 429 or
 * 5xx is worth retrying; any other status means the provider refused this request for good.
 */
export async function post(request: HttpRequest, delivery: Delivery): Promise<{ status: number; text: string }> {
  let response: Response;
  try {
    response = await fetch(request.url, {
      method: 'POST',
      headers: {
        'Content-Type': request.contentType ?? 'application/json',
        'User-Agent': 'Herald',
        'X-Herald-Delivery-Id': delivery.deliveryId,
        ...request.headers,
      },
      body: request.body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
      redirect: 'error',
    });
  } catch (err) {
    const reason = err instanceof Error && err.name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS / 1000} s` : describe(err);
    throw new ProviderError(`Could not reach ${new URL(request.url).host}: ${reason}`, false);
  }
  const text = (await response.text()).slice(0, RAW_LIMIT);
  if (response.ok) return { status: response.status, text };
  const retryable = response.status === 408 || response.status === 429 || response.status >= 500;
  const retryAfterMs = retryable ? retryAfter(response.headers.get('retry-after')) : undefined;
  throw new ProviderError(`${new URL(request.url).host} answered ${response.status}`, !retryable, `${response.status} ${text}`, retryAfterMs);
}

/** A `Retry-After` header in milliseconds from now: whole seconds, or an HTTP date. */
function retryAfter(header: string | null): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function describe(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}

/** A provider's API address: its default, or the integration's `baseUrl` without a trailing slash. */
export function baseUrl(configured: string | undefined, fallback: string): string {
  return (configured ?? fallback).replace(/\/+$/, '');
}
