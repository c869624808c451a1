import { excerpt, post } from '../http.js';
import type { ChatProvider } from '../types.js';

/** A chat provider that posts to the subscriber's incoming-webhook URL, in its own body shape. */
function webhook(body: (content: string, channel?: string) => object): ChatProvider {
  return {
    async send(message, _credentials, delivery) {
      const response = await post({ url: message.webhookUrl, body: JSON.stringify(body(message.content, message.channel)) }, delivery);
      return { raw: excerpt(response.status, response.text) };
    },
  };
}

export const slack = webhook((text, channel) => (channel ? { text, channel } : { text }));
export const discord = webhook((content) => ({ content }));
export const msteams = webhook((text) => ({ text }));
