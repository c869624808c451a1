import { providerUrl, excerpt, post } from '../http.js';
import type { EmailProvider } from '../types.js';
import { withPreheader } from './preheader.js';

/** Email through SendGrid's v3 Mail Send API. */
export const sendgrid: EmailProvider = {
  async send(message, credentials, delivery) {
    const response = await post(
      {
        url: providerUrl(credentials.baseUrl, 'https://api.sendgrid.com', '/v3/mail/send'),
        headers: { Authorization: `Bearer ${credentials.apiKey}` },
        body: JSON.stringify({
          personalizations: [{ to: [{ email: message.to }] }],
          from: { email: credentials.from, name: message.senderName ?? credentials.senderName },
          subject: message.subject,
          content: [{ type: 'text/html', value: withPreheader(message.html, message.preheader) }],
          headers: { 'X-Herald-Delivery-Id': delivery.deliveryId },
        }),
      },
      delivery,
    );
    return { raw: excerpt(response.status, response.text) };
  },
};
