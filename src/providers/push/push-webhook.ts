import { excerpt, post } from '../http.js';
import type { PushProvider } from '../types.js';
import { standardWebhookHeaders } from '../standard-webhooks.js';

/**
 * Push through your own endpoint: Herald POSTs the notification as JSON, signed with the
 * integration's secret as Standard Webhooks says (standardWebhookHeaders), so the receiver can
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
    const headers = standardWebhookHeaders([credentials.secretKey ?? ''], delivery.deliveryId, new Date(), body);
    const response = await post({ url: credentials.webhookUrl!, body, headers }, delivery);
    return { raw: excerpt(response.status, response.text) };
  },
};
