import { Webhook } from 'standardwebhooks';

/**
 * The Standard Webhooks headers (standardwebhooks.com) Herald signs a POST with, for its outbound
 * webhooks and the push-webhook provider: `webhook-id` (the same on every retry, so a receiver can
 * drop duplicates), `webhook-timestamp` (seconds) and `webhook-signature`, `v1,<base64 HMAC-SHA256
 * of "id.timestamp.body">` for each secret, space-separated (two while a rotated secret's grace
 * period runs). Signing the id and the time with the body lets a receiver refuse a captured
 * delivery replayed later. A secret is `whsec_<base64>` as the standard gives it; any other string
 * signs as its UTF-8 bytes.
 */
export function standardWebhookHeaders(secrets: readonly string[], id: string, at: Date, body: string): Record<string, string> {
  const signatures = secrets.map((secret) => (secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' })).sign(id, at, body));
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signatures.join(' ') };
}
