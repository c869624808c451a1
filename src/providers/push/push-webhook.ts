import { createHmac } from 'node:crypto';
import { excerpt, post } from '../http.js';
import type { PushProvider } from '../types.js';

/**
 * Push through your own endpoint: Herald POSTs the notification as JSON and signs the body with
 * the integration's secret (`X-Herald-Signature: sha256=<hex HMAC>`), so the receiver can check it
 * came from Herald.
 */
export const pushWebhook: PushProvider = {
  async send(message, credentials, delivery) {
    const body = JSON.stringify({
      deliveryId: delivery.deliveryId,
      subscriberId: message.subscriberId,
      deviceTokens: message.deviceTokens,
      title: message.title,
      content: message.content,
      data: message.data ?? {},
    });
    const signature = createHmac('sha256', credentials.secretKey ?? '').update(body).digest('hex');
    const response = await post(
      { url: credentials.webhookUrl!, body, headers: { 'X-Herald-Signature': `sha256=${signature}` } },
      delivery,
    );
    return { raw: excerpt(response.status, response.text) };
  },
};
