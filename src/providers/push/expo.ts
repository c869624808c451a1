import { baseUrl, post } from '../http.js';
import { ProviderError, type PushProvider } from '../types.js';

interface ExpoTicket {
  status: 'ok' | 'error';
  message?: string;
  details?: { error?: string };
}

/** Push through Expo's push service: one ticket per device token. */
export const expo: PushProvider = {
  async send(message, credentials, delivery) {
    const response = await post(
      {
        url: `${baseUrl(credentials.baseUrl, 'https://exp.host')}/--/api/v2/push/send`,
        headers: credentials.apiKey ? { Authorization: `Bearer ${credentials.apiKey}` } : {},
        body: JSON.stringify(
          message.deviceTokens.map((to) => ({ to, title: message.title, body: message.content, data: message.data ?? {} })),
        ),
      },
      delivery,
    );
    const tickets = (JSON.parse(response.text || '{}') as { data?: ExpoTicket[] }).data ?? [];
    const failed = tickets.filter((ticket) => ticket.status === 'error');
    // Every device refused (DeviceNotRegistered and the like): resending will not help.
    if (tickets.length > 0 && failed.length === tickets.length) {
      throw new ProviderError(`Expo refused every device: ${failed[0].details?.error ?? failed[0].message}`, true, response.text);
    }
    return { raw: response.text };
  },
};
