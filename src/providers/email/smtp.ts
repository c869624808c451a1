import nodemailer from 'nodemailer';
import { DEFAULT_OUTBOUND_POLICY, DestinationRefused, isIpLiteral, resolveDestination } from '../../outbound-guard.js';
import { RAW_EXCERPT_CHARS, refusedDestination } from '../http.js';
import { ProviderError, type EmailProvider } from '../types.js';

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`;

/**
 * Email through any SMTP server, with nodemailer. The host is resolved and checked by the outbound
 * guard and nodemailer connects to the checked address (the name kept for TLS). Timeouts: connecting
 * (`connectMs`), the greeting and each reply (`firstByteMs`), and the whole send (`sendMs`), so a
 * server that accepts and never speaks, or answers a little at a time, ends as a retryable timeout.
 */
export const smtp: EmailProvider = {
  async send(message, credentials, delivery) {
    const policy = delivery.outbound ?? DEFAULT_OUTBOUND_POLICY;
    const { timeouts } = policy;
    const host = String(credentials.host ?? '');
    let timer: NodeJS.Timeout | undefined;
    let transport: ReturnType<typeof nodemailer.createTransport> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new ProviderError(`SMTP server ${host} did not complete the exchange within ${seconds(timeouts.sendMs)}`, false, undefined, undefined, 'timeout')),
        timeouts.sendMs,
      );
    });
    const exchange = async () => {
      let target;
      try {
        target = await resolveDestination(host, policy);
      } catch (err) {
        if (err instanceof DestinationRefused) throw refusedDestination();
        throw new ProviderError(`SMTP ${(err as { code?: string }).code ?? 'error'}: could not resolve the host`, false, undefined, undefined, 'network');
      }
      transport = nodemailer.createTransport({
        host: target.address,
        port: Number(credentials.port),
        secure: credentials.secure === true,
        servername: isIpLiteral(host) ? undefined : host,
        auth: credentials.user ? { user: credentials.user, pass: credentials.password ?? '' } : undefined,
        connectionTimeout: timeouts.connectMs,
        greetingTimeout: timeouts.firstByteMs,
        socketTimeout: timeouts.firstByteMs,
      });
      try {
        const info = await transport.sendMail({
          from: credentials.senderName || message.senderName ? { name: message.senderName ?? credentials.senderName!, address: credentials.from! } : credentials.from,
          to: message.to,
          subject: message.subject,
          html: message.html,
          headers: { 'X-Herald-Delivery-Id': delivery.deliveryId },
        });
        return { raw: String(info.response ?? '').slice(0, RAW_EXCERPT_CHARS) };
      } catch (err) {
        const { responseCode, response, code, message: text } = err as { responseCode?: number; response?: string; code?: string; message?: string };
        const raw = response === undefined ? undefined : String(response).slice(0, RAW_EXCERPT_CHARS);
        if (code === 'ETIMEDOUT') {
          throw new ProviderError(`SMTP server ${host} timed out: ${text ?? 'no answer'}`, false, raw, undefined, 'timeout');
        }
        // 5xx replies are the server's final word (no such mailbox, refused sender); 4xx and
        // connection trouble are temporary.
        const permanent = responseCode !== undefined && responseCode >= 500;
        const kind = responseCode !== undefined ? 'rejected' : 'network';
        throw new ProviderError(`SMTP ${responseCode ?? code ?? 'error'}: ${text ?? 'sending failed'}`, permanent, raw, undefined, kind);
      }
    };
    const sending = exchange();
    sending.catch(() => undefined); // past the deadline its failure is no longer anyone's answer
    try {
      return await Promise.race([sending, deadline]);
    } finally {
      clearTimeout(timer);
      transport?.close();
    }
  },
};
