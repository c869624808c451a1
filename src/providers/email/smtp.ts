import nodemailer from 'nodemailer';
import { ProviderError, type EmailProvider } from '../types.js';

/** Email through any SMTP server, with nodemailer. */
export const smtp: EmailProvider = {
  async send(message, credentials, delivery) {
    const transport = nodemailer.createTransport({
      host: credentials.host,
      port: Number(credentials.port),
      secure: credentials.secure === true,
      auth: credentials.user ? { user: credentials.user, pass: credentials.password ?? '' } : undefined,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
    });
    try {
      const info = await transport.sendMail({
        from: credentials.senderName || message.senderName ? { name: message.senderName ?? credentials.senderName!, address: credentials.from! } : credentials.from,
        to: message.to,
        subject: message.subject,
        html: message.html,
        headers: { 'X-Herald-Delivery-Id': delivery.deliveryId },
      });
      return { raw: info.response };
    } catch (err) {
      const { responseCode, response, code, message: text } = err as { responseCode?: number; response?: string; code?: string; message?: string };
      // 5xx replies are the server's final word (no such mailbox, refused sender); 4xx and
      // connection trouble are temporary.
      const permanent = responseCode !== undefined && responseCode >= 500;
      throw new ProviderError(`SMTP ${responseCode ?? code ?? 'error'}: ${text ?? 'sending failed'}`, permanent, response);
    } finally {
      transport.close();
    }
  },
};
