import { providerUrl, excerpt, post } from '../http.js';
import type { SmsProvider } from '../types.js';

/** SMS through Twilio's Messages API. */
export const twilio: SmsProvider = {
  async send(message, credentials, delivery) {
    const sid = encodeURIComponent(credentials.accountSid ?? '');
    const response = await post(
      {
        url: providerUrl(credentials.baseUrl, 'https://api.twilio.com', `/2010-04-01/Accounts/${sid}/Messages.json`),
        contentType: 'application/x-www-form-urlencoded',
        headers: { Authorization: `Basic ${Buffer.from(`${credentials.accountSid}:${credentials.token}`).toString('base64')}` },
        body: new URLSearchParams({ To: message.to, From: credentials.from ?? '', Body: message.content }).toString(),
      },
      delivery,
    );
    return { raw: excerpt(response.status, response.text) };
  },
};
