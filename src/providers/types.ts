import type { IntegrationCredentials } from './catalogue.js';

/** Identifies one delivery across retries, so a receiver can drop duplicates. */
export interface Delivery {
  deliveryId: string;
}

export interface EmailMessage {
  to: string;
  subject: string;
  html: string;
  preheader?: string;
  senderName?: string;
}

export interface SmsMessage {
  to: string;
  content: string;
}

export interface ChatMessage {
  webhookUrl: string;
  content: string;
  channel?: string;
}

export interface PushMessage {
  deviceTokens: string[];
  title: string;
  content: string;
  data?: Record<string, unknown>;
  subscriberId: string;
}

export interface SendResult {
  /** The provider's answer, kept in the execution detail. */
  raw?: string;
}

/**
 * A failed send. `permanent` failures (the provider refused the request: a 4xx, bad credentials, a
 * dead device token) are not retried; the others (network, timeouts, 5xx, 429) are.
 */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly raw?: string,
    /** How long the provider asked us to wait before trying again (its `Retry-After`), if it did. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

export interface EmailProvider {
  send(message: EmailMessage, credentials: IntegrationCredentials, delivery: Delivery): Promise<SendResult>;
}
export interface SmsProvider {
  send(message: SmsMessage, credentials: IntegrationCredentials, delivery: Delivery): Promise<SendResult>;
}
export interface ChatProvider {
  send(message: ChatMessage, credentials: IntegrationCredentials, delivery: Delivery): Promise<SendResult>;
}
export interface PushProvider {
  send(message: PushMessage, credentials: IntegrationCredentials, delivery: Delivery): Promise<SendResult>;
}
