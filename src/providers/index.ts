import type { ProviderId } from './catalogue.js';
import type { ChatProvider, EmailProvider, PushProvider, SmsProvider } from './types.js';
import { smtp } from './email/smtp.js';
import { sendgrid } from './email/sendgrid.js';
import { twilio } from './sms/twilio.js';
import { discord, msteams, slack } from './chat/webhooks.js';
import { expo } from './push/expo.js';
import { pushWebhook } from './push/push-webhook.js';

/** The implementation behind each provider id, by channel. In-app needs none: it is stored. */
export const senders = {
  email: { smtp, sendgrid } as Partial<Record<ProviderId, EmailProvider>>,
  sms: { twilio } as Partial<Record<ProviderId, SmsProvider>>,
  chat: { slack, discord, msteams } as Partial<Record<ProviderId, ChatProvider>>,
  push: { expo, 'push-webhook': pushWebhook } as Partial<Record<ProviderId, PushProvider>>,
};
