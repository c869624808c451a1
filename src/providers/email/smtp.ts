import nodemailer from 'nodemailer';
import { DEFAULT_OUTBOUND_POLICY, DestinationRefused, isIpLiteral, resolveDestination, type ResolvedAddress } from '../../outbound-guard.js';
import { RAW_EXCERPT_CHARS, refusedDestination } from '../http.js';
import { ProviderError, type EmailProvider } from '../types.js';
import { withPreheader } from './preheader.js';

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`;
const timedOut = (message: string) => new ProviderError(message, false, undefined, undefined, 'timeout');

/**
 * Email through any SMTP server, with nodemailer. The host is resolved and checked by the outbound
 * guard and nodemailer connects to the checked address (the name kept for TLS). Timeouts: resolving
 * the name (`connectMs`), connecting and the greeting together (`connectMs + firstByteMs`, the
 * greeting at most `firstByteMs`), each reply (`firstByteMs`), and the
 * whole send (`sendMs`, after which the exchange is aborted), so a server that accepts and never
 * speaks, or answers a little at a time, ends as a retryable timeout.
 */
export const smtp: EmailProvider = {
  async send(message, credentials, delivery) {
    const policy = delivery.outbound ?? DEFAULT_OUTBOUND_POLICY;
    const { timeouts } = policy;
    const host = String(credentials.host ?? '');
    const abort = new AbortController();
    const timers: NodeJS.Timeout[] = [];
    const within = <T>(work: Promise<T>, ms: number, error: () => ProviderError) =>
      Promise.race([work, new Promise<never>((_, reject) => timers.push(setTimeout(() => reject(error()), ms)))]);

    const exchange = async () => {
      let target: ResolvedAddress;
      try {
        target = await within(resolveDestination(host, policy), timeouts.connectMs, () =>
          timedOut(`SMTP server ${host} could not be reached within ${seconds(timeouts.connectMs)}`),
        );
      } catch (err) {
        if (err instanceof ProviderError) throw err;
        if (err instanceof DestinationRefused) throw refusedDestination();
        throw new ProviderError(`SMTP ${(err as { code?: string }).code ?? 'error'}: could not resolve the host`, false, undefined, undefined, 'network');
      }
      // Past the whole-send bound nothing may start: the caller has already given up.
      if (abort.signal.aborted) throw timedOut(`SMTP server ${host} did not complete the exchange within ${seconds(timeouts.sendMs)}`);
      const transport = nodemailer.createTransport({
        host: target.address,
        port: Number(credentials.port),
        secure: credentials.secure === true,
        servername: isIpLiteral(host) ? undefined : host,
        auth: credentials.user ? { user: credentials.user, pass: credentials.password ?? '' } : undefined,
        // nodemailer bounds the greeting by what is left of connectionTimeout as well: with the
        // connect bound alone, a server that waits a few seconds before it greets (postscreen)
        // failed every attempt. Connecting and the greeting share both bounds.
        connectionTimeout: timeouts.connectMs + timeouts.firstByteMs,
        greetingTimeout: timeouts.firstByteMs,
        socketTimeout: timeouts.firstByteMs,
      });
      try {
        const info = await transport.sendMail({
          from: credentials.senderName || message.senderName ? { name: message.senderName ?? credentials.senderName!, address: credentials.from! } : credentials.from,
          to: message.to,
          subject: message.subject,
          html: withPreheader(message.html, message.preheader),
          headers: { 'X-Herald-Delivery-Id': delivery.deliveryId },
          signal: abort.signal,
        });
        return { raw: String(info.response ?? '').slice(0, RAW_EXCERPT_CHARS) };
      } catch (err) {
        const { responseCode, response, code, message: text } = err as { responseCode?: number; response?: string; code?: string; message?: string };
        const raw = response === undefined ? undefined : String(response).slice(0, RAW_EXCERPT_CHARS);
        if (code === 'ETIMEDOUT') throw new ProviderError(`SMTP server ${host} timed out: ${text ?? 'no answer'}`, false, raw, undefined, 'timeout');
        // 5xx replies are the server's final word (no such mailbox, refused sender); 4xx and
        // connection trouble are temporary.
        const permanent = responseCode !== undefined && responseCode >= 500;
        throw new ProviderError(`SMTP ${responseCode ?? code ?? 'error'}: ${text ?? 'sending failed'}`, permanent, raw, undefined, responseCode !== undefined ? 'rejected' : 'network');
      } finally {
        transport.close();
      }
    };

    try {
      return await within(exchange(), timeouts.sendMs, () => {
        abort.abort();
        return timedOut(`SMTP server ${host} did not complete the exchange within ${seconds(timeouts.sendMs)}`);
      });
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
  },
};
