import { providerUrl, excerpt, post } from '../http.js';
import { ProviderError, type PushProvider, type RecipientOutcome } from '../types.js';

interface ExpoTicket {
  status: 'ok' | 'error';
  id?: string;
  message?: string;
  details?: { error?: string };
}

/** How much of each token and of each ticket's error the execution detail keeps. */
const TOKEN_TAIL = 12;
const ERROR_CHARS = 80;

/** Expo asks senders to slow down with this ticket error; every other one is about the device or the message. */
const RATE_EXCEEDED = 'MessageRateExceeded';

/** Expo's answer, parsed; undefined when it is not JSON. */
function parsed(text: string): { data?: unknown; errors?: unknown } | undefined {
  try {
    const answer: unknown = JSON.parse(text);
    return answer !== null && typeof answer === 'object' ? (answer as { data?: unknown; errors?: unknown }) : {};
  } catch {
    return undefined;
  }
}

/** Each device token's outcome, from the tickets in the order the messages were sent; undefined when the answer has none. */
function outcomesOf(answer: { data?: unknown } | undefined, deviceTokens: string[]): RecipientOutcome[] | undefined {
  const tickets = answer?.data;
  if (!Array.isArray(tickets)) return undefined;
  return deviceTokens.map((to, i): RecipientOutcome => {
    const ticket = tickets[i] as ExpoTicket | undefined;
    if (ticket?.status === 'ok') return { to, status: 'ok' };
    return { to, status: 'error', error: ticket ? (ticket.details?.error ?? ticket.message ?? 'error') : 'no ticket' };
  });
}

/** The code (or message) of an error of the whole request: an answer with `errors` and no tickets. */
function requestErrorOf(answer: { data?: unknown; errors?: unknown } | undefined): string | undefined {
  if (!answer || answer.data !== undefined || !Array.isArray(answer.errors) || answer.errors.length === 0) return undefined;
  const [first] = answer.errors as Array<{ code?: unknown; message?: unknown } | null>;
  return String(first?.code ?? first?.message ?? 'error').slice(0, ERROR_CHARS);
}

/**
 * The execution detail's excerpt: the counts, then every token's outcome, each token shown by its
 * position and its last characters (a token can be 4 KiB long; a subscriber has at most 100).
 */
function summary(status: number, outcomes: RecipientOutcome[]): string {
  const ok = outcomes.filter((outcome) => outcome.status === 'ok').length;
  const each = outcomes.map((outcome, i) => `#${i + 1} …${outcome.to.slice(-TOKEN_TAIL)}: ${outcome.status === 'ok' ? 'ok' : (outcome.error ?? 'error').slice(0, ERROR_CHARS)}`);
  return `${status} ${ok} of ${outcomes.length} tickets ok. ${each.join('; ')}`;
}

/**
 * Push through Expo's push service: the subscriber's devices in one request, one ticket per device
 * token. The request is sent once: an answer with some tickets ok is a send, with one outcome per
 * token; only when every device is refused does the send fail (for good, unless Expo asked us to
 * slow down).
 */
export const expo: PushProvider = {
  async send(message, credentials, delivery) {
    const response = await post(
      {
        url: providerUrl(credentials.baseUrl, 'https://exp.host', '/--/api/v2/push/send'),
        headers: credentials.apiKey ? { Authorization: `Bearer ${credentials.apiKey}` } : {},
        body: JSON.stringify(
          message.deviceTokens.map((to) => ({ to, title: message.title, body: message.content, data: message.data ?? {} })),
        ),
      },
      delivery,
    );
    // An error of the whole request (Expo's `errors`, without tickets): nothing was sent.
    const answer = parsed(response.text);
    const requestError = requestErrorOf(answer);
    if (requestError) throw new ProviderError(`Expo refused the request: ${requestError}`, true, excerpt(response.status, response.text), undefined, 'rejected');
    const outcomes = outcomesOf(answer, message.deviceTokens);
    // A 2xx whose tickets cannot be read was still accepted: sending it again would duplicate it.
    if (!outcomes) return { raw: excerpt(response.status, response.text), note: 'accepted, but its answer held no ticket per device: no outcome per device is known' };
    const failed = outcomes.filter((outcome) => outcome.status === 'error');
    if (failed.length > 0 && failed.length === outcomes.length) {
      const slowDown = failed.some((outcome) => outcome.error === RATE_EXCEEDED);
      throw new ProviderError(
        `Expo refused every device: ${failed[0].error}`,
        !slowDown,
        summary(response.status, outcomes),
        undefined,
        slowDown ? 'rate-limited' : 'rejected',
        outcomes,
      );
    }
    return { raw: summary(response.status, outcomes), outcomes, note: `${outcomes.length - failed.length} of ${outcomes.length} tickets ok` };
  },
};
