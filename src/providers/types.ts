import type { IntegrationCredentials } from './catalogue.js';
import type { OutboundPolicy } from '../outbound-guard.js';

export interface Delivery {
  /** Identifies one delivery across retries, so a receiver can drop duplicates. */
  deliveryId: string;
  /** Where the send may go and how long it may take (the engine passes `config.outbound`); public addresses and the default timeouts when absent. */
  outbound?: OutboundPolicy;
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

/** What happened to one recipient of a send to many (Expo: one ticket per device token). */
export interface RecipientOutcome {
  /** The device token (or address) as given. */
  to: string;
  status: 'ok' | 'error';
  /** The provider's reason for an error (`DeviceNotRegistered`, …). */
  error?: string;
}

export interface SendResult {
  /**
   * A short excerpt of the provider's answer (at most RAW_EXCERPT_CHARS), kept in the execution
   * detail; for a push to several devices, every device's outcome in a short line each.
   */
  raw?: string;
  /** A send to many recipients: one outcome each, in the order they were given. */
  outcomes?: RecipientOutcome[];
  /** What the execution detail adds to the send's own line: how many recipients took it, or why that is not known. */
  note?: string;
}

/**
 * Why a send failed, for the engine's retry, circuit-breaker and rate-limit decisions:
 * - `timeout`: connect, first byte or whole send took too long (retryable; counts toward a breaker);
 * - `http-5xx`: the provider answered 5xx (retryable; counts toward a breaker);
 * - `rate-limited`: 429 (retryable at `retryAfterMs` when given; spends no attempt);
 * - `refused`: the destination is not one Herald may reach (permanent, says nothing of the network);
 * - `network`: the connection failed or broke (retryable);
 * - `rejected`: the provider refused this request (a 4xx or a 5xx SMTP reply: permanent; a 408 or a 4xx SMTP reply: retryable).
 */
export type ProviderErrorKind = 'timeout' | 'http-5xx' | 'rate-limited' | 'refused' | 'network' | 'rejected';

/**
 * A failed send. `permanent` failures (the provider refused the request: a 4xx, bad credentials, a
 * dead device token, a refused destination) are not retried; the others (network, timeouts, 5xx,
 * 429) are. `raw` is at most a short excerpt of the answer.
 */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly raw?: string,
    /** How long the provider asked us to wait before trying again (its `Retry-After`), if it did. */
    readonly retryAfterMs?: number,
    readonly kind: ProviderErrorKind = permanent ? 'rejected' : 'network',
    /** A send to many recipients that all failed: one outcome each. */
    readonly outcomes?: RecipientOutcome[],
  ) {
    super(message);
  }

  /** Whether a circuit breaker should count it against the destination (it is slow or broken, not the request). */
  get destinationFault(): boolean {
    return this.kind === 'timeout' || this.kind === 'http-5xx';
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
