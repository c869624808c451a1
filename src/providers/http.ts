import http from 'node:http';
import https from 'node:https';
import { DEFAULT_OUTBOUND_POLICY, DestinationRefused, isIpLiteral, REFUSED_DESTINATION, resolveDestination } from '../outbound-guard.js';
import { ProviderError, type Delivery, type ProviderErrorKind } from './types.js';

/** The most of an answer Herald reads; the rest is not waited for (a provider's protocol needs far less). */
export const ANSWER_LIMIT_BYTES = 64 * 1024;
/** The most of an answer kept in an execution detail. */
export const RAW_EXCERPT_CHARS = 500;

export interface HttpRequest {
  url: string;
  body: string;
  contentType?: string;
  headers?: Record<string, string>;
  /** Answer every status instead of throwing for those that are not 2xx (webhooks sort them themselves). */
  anyStatus?: boolean;
}

export interface HttpAnswer {
  status: number;
  /** The answer's body, whole up to ANSWER_LIMIT_BYTES: parse this. */
  text: string;
  /** Whether the body went on past ANSWER_LIMIT_BYTES (and was not read further). */
  truncated: boolean;
  /** The answer's `Retry-After`, in milliseconds from now (only with `anyStatus`). */
  retryAfterMs?: number;
}

/** The short form of an answer kept in execution details: its status and the start of its body. */
export function excerpt(status: number, text: string): string {
  return `${status} ${text}`.trim().slice(0, RAW_EXCERPT_CHARS);
}

export function refusedDestination(): ProviderError {
  return new ProviderError(REFUSED_DESTINATION, true, undefined, undefined, 'refused');
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`;

/**
 * POSTs to a provider and sorts the outcome: 2xx is sent; a timeout, a network error, 408, 429 or
 * 5xx is worth retrying; a redirect or any other status means the provider refused this request
 * for good. The host is resolved and checked by the outbound guard, and the connection goes to the
 * address that was checked (with the name as Host and TLS server name). Each phase has its bound
 * (`delivery.outbound.timeouts`): connecting, the first byte of the answer, and the whole send; the
 * answer is read up to ANSWER_LIMIT_BYTES and the rest dropped.
 */
export function post(request: HttpRequest, delivery: Delivery): Promise<HttpAnswer> {
  const policy = delivery.outbound ?? DEFAULT_OUTBOUND_POLICY;
  const { timeouts } = policy;
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return Promise.reject(refusedDestination());
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) return Promise.reject(refusedDestination());
  const secure = url.protocol === 'https:';
  const host = url.host;

  return new Promise<HttpAnswer>((resolve, reject) => {
    let settled = false;
    let req: http.ClientRequest | undefined;
    let firstByteTimer: NodeJS.Timeout | undefined;
    const timedOut = (what: string, ms: number) => () =>
      finish(new ProviderError(`${host} ${what} within ${seconds(ms)}`, false, undefined, undefined, 'timeout'));
    const sendTimer = setTimeout(timedOut('did not complete the exchange', timeouts.sendMs), timeouts.sendMs);
    const connectTimer = setTimeout(timedOut('did not accept a connection', timeouts.connectMs), timeouts.connectMs);
    function finish(err: ProviderError | undefined, answer?: HttpAnswer): void {
      if (settled) return;
      settled = true;
      clearTimeout(sendTimer);
      clearTimeout(connectTimer);
      clearTimeout(firstByteTimer);
      if (err) {
        req?.destroy();
        reject(err);
      } else resolve(answer!);
    }
    const networkError = (err: unknown) => new ProviderError(`Could not reach ${host}: ${describe(err)}`, false, undefined, undefined, 'network');

    // To the address that was checked (no second lookup); the name goes in Host and, for https, SNI.
    const makeRequest = (address: string, body: Buffer) =>
      (secure ? https : http).request({
        host: address,
        port: url.port || (secure ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        servername: secure && !isIpLiteral(url.hostname) ? url.hostname : undefined,
        headers: {
          Host: host,
          'Content-Type': request.contentType ?? 'application/json',
          'Content-Length': String(body.length),
          'User-Agent': 'Herald',
          'X-Herald-Delivery-Id': delivery.deliveryId,
          ...request.headers,
        },
      });

    resolveDestination(url.hostname, policy).then(
      (target) => {
        if (settled) return;
        const body = Buffer.from(request.body, 'utf8');
        try {
          req = makeRequest(target.address, body);
        } catch (err) {
          // Node refuses a header it cannot send (a control character in a credential stored before
          // credentials were checked for it): the send fails for good instead of the process.
          const why = err instanceof Error ? err.message : String(err); // names the header, not its value
          return finish(new ProviderError(`The request to ${host} could not be made: ${why}`, true, undefined, undefined, 'rejected'));
        }
        req.on('socket', (socket) => {
          const connected = () => {
            clearTimeout(connectTimer);
            if (!settled) firstByteTimer = setTimeout(timedOut('did not answer', timeouts.firstByteMs), timeouts.firstByteMs);
          };
          // A kept-alive socket is already open; a new one opens (and, for https, shakes hands) first.
          if (socket.connecting) socket.once(secure ? 'secureConnect' : 'connect', connected);
          else connected();
        });
        req.on('error', (err) => finish(networkError(err)));
        req.on('response', (res) => {
          clearTimeout(firstByteTimer);
          const chunks: Buffer[] = [];
          let size = 0;
          let truncated = false;
          const done = () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) return finish(undefined, { status, text, truncated });
            if (request.anyStatus) return finish(undefined, { status, text, truncated, retryAfterMs: retryAfter(header(res.headers['retry-after'])) });
            finish(statusError(host, status, text, res.headers['retry-after']));
          };
          res.on('data', (chunk: Buffer) => {
            if (settled || truncated) return;
            const room = ANSWER_LIMIT_BYTES - size;
            chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
            size += Math.min(chunk.length, room);
            if (chunk.length >= room) {
              // Enough: stop reading (the socket is closed, not drained) and decide on what we have.
              truncated = chunk.length > room || !res.complete;
              done();
              res.destroy();
            }
          });
          res.on('end', done);
          res.on('error', (err) => finish(networkError(err)));
          res.on('aborted', () => finish(networkError(new Error('the answer was cut off'))));
        });
        req.end(body);
      },
      (err: unknown) => finish(err instanceof DestinationRefused ? refusedDestination() : networkError(err)),
    );
  });
}

function statusError(host: string, status: number, text: string, retryAfterHeader: string | string[] | undefined): ProviderError {
  const raw = excerpt(status, text);
  if (status >= 300 && status < 400) {
    return new ProviderError(`${host} answered ${status}, a redirect, which Herald does not follow`, true, raw, undefined, 'rejected');
  }
  const kind: ProviderErrorKind = status === 429 ? 'rate-limited' : status === 408 ? 'timeout' : status >= 500 ? 'http-5xx' : 'rejected';
  const retryable = kind !== 'rejected';
  const retryAfterMs = retryable ? retryAfter(Array.isArray(retryAfterHeader) ? retryAfterHeader[0] : retryAfterHeader) : undefined;
  return new ProviderError(`${host} answered ${status}`, !retryable, raw, retryAfterMs, kind);
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

const DAY = '(Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const MONTH = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '\\d{2}:\\d{2}:\\d{2}';
/** RFC 9110's HTTP-date in the three forms a recipient reads: IMF-fixdate, RFC 850's, and asctime's (whose zone is GMT unsaid). */
const HTTP_DATES = [
  new RegExp(`^${DAY}, \\d{2} ${MONTH} \\d{4} ${TIME} GMT$`),
  new RegExp(`^(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), \\d{2}-${MONTH}-\\d{2} ${TIME} GMT$`),
  new RegExp(`^${DAY} ${MONTH} [ \\d]\\d ${TIME} \\d{4}$`),
];

/**
 * A `Retry-After` header in milliseconds from now: seconds (a fraction of one taken too), or an
 * HTTP-date; undefined for anything else. JavaScript's own date reading takes "-5" or "1.5" for a
 * day in 2001, which made them "retry now".
 */
export function retryAfter(header: string | undefined): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  const form = HTTP_DATES.findIndex((date) => date.test(value));
  if (form === -1) return undefined;
  const at = Date.parse(form === 2 ? `${value} GMT` : value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function describe(err: unknown): string {
  const { code, message } = (err ?? {}) as { code?: string; message?: string };
  return code ?? message ?? String(err);
}

/**
 * The URL of one of a provider's API calls: `path` added to the path of its address (the
 * integration's `baseUrl`, or the provider's default), whose query, if any, stays at the end. Put
 * together as text, a `baseUrl` with a query took the call's path into the query.
 */
export function providerUrl(configured: string | undefined, fallback: string, path: string): string {
  // Checked when the integration was saved; one stored before that check fails its sends for good.
  const address = configured ?? fallback;
  if (!URL.canParse(address)) throw new ProviderError('The integration\'s baseUrl is not a URL', true);
  const url = new URL(address);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  url.hash = '';
  return url.toString();
}
