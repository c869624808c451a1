import { Webhook } from 'standardwebhooks';
import { excerpt, post } from '../http.js';
import type { PushProvider } from '../types.js';

/**
 * The Standard Webhooks headers (standardwebhooks.com) of a delivery: `webhook-id` (the delivery's
 * id, the same on every retry, so a receiver can drop duplicates), `webhook-timestamp` (seconds)
 * and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`). Signing the id and the
 * time with the body lets a receiver refuse a captured delivery replayed later. The key is the
 * integration's secretKey: a `whsec_<base64>` secret as the standard gives it, any other string as
 * its UTF-8 bytes.
 */
export function webhookSignatureHeaders(secretKey: string, id: string, at: Date, body: string): Record<string, string> {
  const webhook = secretKey.startsWith('whsec_') ? new Webhook(secretKey) : new Webhook(secretKey, { format: 'raw' });
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': webhook.sign(id, at, body) };
}

/**
 * Push through your own endpoint: Herald POSTs the notification as JSON, signed with the
 * integration's secret as Standard Webhooks says (webhookSignatureHeaders), so the receiver can
 * check it came from Herald, and recently.
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
    const headers = webhookSignatureHeaders(credentials.secretKey ?? '', delivery.deliveryId, new Date(), body);
    const response = await post({ url: credentials.webhookUrl!, body, headers }, delivery);
    return { raw: excerpt(response.status, response.text) };
  },
};
