import type { Schemas } from '../contract.js';
import { hostProblem, urlProblem } from '../outbound-guard.js';

/**
 * What Herald knows about each provider of the contract: its channel, its name, the credentials an
 * integration of it takes, and (chat and push) the credentials each subscriber needs. Integrations
 * are checked against it when they are written; the engine reads it to deliver.
 */
export type ProviderId = Schemas['ProviderId'];
export type ChannelType = Schemas['ChannelType'];
export type IntegrationCredentials = Schemas['IntegrationCredentials'];
export type ChannelCredentials = Schemas['ChannelCredentials'];
export type SendLimits = Schemas['SendLimits'];
export type CredentialName = keyof IntegrationCredentials;
export type ChannelCredentialName = keyof ChannelCredentials;

export interface CredentialSpec {
  /** The integration cannot work without it. */
  required?: boolean;
  /** Never shown back, not even partly masked, and never logged. */
  secret?: boolean;
  /** Where Herald connects: a `url` must be http(s), a `host` a name or address; either must be public (or allowed). */
  destination?: 'url' | 'host';
  /** Sent in an HTTP header (a bearer token): printable ASCII without spaces, as a header value must be. */
  header?: boolean;
}

export interface ProviderEntry {
  id: ProviderId;
  channel: ChannelType;
  displayName: string;
  /** Every credential an integration of this provider takes; any other one is refused. */
  credentials: Partial<Record<CredentialName, CredentialSpec>>;
  /** Chat and push: what each subscriber must give (PUT /subscribers/{id}/credentials). */
  subscriberCredentials?: Partial<Record<ChannelCredentialName, { required?: boolean; destination?: 'url' }>>;
  /** How fast it accepts sends, from its own published limits (an integration may set its own). */
  sendLimits?: SendLimits;
}

/** One problem with a credentials object; the same shape as the error body's `details`. */
export interface CredentialProblem {
  field: string;
  message: string;
}

const webhookChat = { webhookUrl: { required: true, destination: 'url' } } as const;
const pushTokens = { deviceTokens: { required: true } } as const;

// A Record over ProviderId: adding a provider to the contract without an entry here is a type error.
export const PROVIDERS: Readonly<Record<ProviderId, ProviderEntry>> = {
  herald: { id: 'herald', channel: 'in_app', displayName: 'Herald In-App', credentials: {} },
  smtp: {
    id: 'smtp',
    channel: 'email',
    displayName: 'SMTP',
    credentials: {
      host: { required: true, destination: 'host' },
      port: { required: true },
      from: { required: true },
      user: {},
      password: { secret: true },
      secure: {},
      senderName: {},
    },
  },
  sendgrid: {
    id: 'sendgrid',
    channel: 'email',
    displayName: 'SendGrid',
    credentials: { apiKey: { required: true, secret: true, header: true }, from: { required: true }, senderName: {}, baseUrl: { destination: 'url' } },
  },
  twilio: {
    id: 'twilio',
    channel: 'sms',
    displayName: 'Twilio',
    credentials: { accountSid: { required: true }, token: { required: true, secret: true }, from: { required: true }, baseUrl: { destination: 'url' } },
    // One segment a second from a long code, which is one integration's sender.
    sendLimits: { perIntegration: [{ limit: 1, seconds: 1 }] },
  },
  slack: {
    id: 'slack',
    channel: 'chat',
    displayName: 'Slack',
    credentials: {},
    subscriberCredentials: webhookChat,
    // About one message a second per channel, that is per incoming webhook.
    sendLimits: { perDestination: [{ limit: 1, seconds: 1 }] },
  },
  // Discord announces its limits in every answer; its 429s are followed instead.
  discord: { id: 'discord', channel: 'chat', displayName: 'Discord', credentials: {}, subscriberCredentials: webhookChat },
  msteams: {
    id: 'msteams',
    channel: 'chat',
    displayName: 'Microsoft Teams',
    credentials: {},
    subscriberCredentials: webhookChat,
    // The connector windows per webhook, all at once.
    sendLimits: {
      perDestination: [
        { limit: 4, seconds: 1 },
        { limit: 60, seconds: 30 },
        { limit: 100, seconds: 3_600 },
        { limit: 150, seconds: 7_200 },
        { limit: 1_800, seconds: 86_400 },
      ],
    },
  },
  expo: {
    id: 'expo',
    channel: 'push',
    displayName: 'Expo Push',
    credentials: { apiKey: { secret: true, header: true }, baseUrl: { destination: 'url' } },
    subscriberCredentials: pushTokens,
    // 600 notifications a second per project; a send costs one per device token.
    sendLimits: { perIntegration: [{ limit: 600, seconds: 1 }] },
  },
  'push-webhook': {
    id: 'push-webhook',
    channel: 'push',
    displayName: 'Push Webhook',
    credentials: { webhookUrl: { required: true, destination: 'url' }, secretKey: { required: true, secret: true } },
    subscriberCredentials: pushTokens,
  },
};

export function providerEntry(providerId: ProviderId): ProviderEntry {
  return PROVIDERS[providerId];
}

/** The limits an integration sends under: for each scope, its own windows when it set them, else its provider's. */
export function sendLimitsOf(providerId: ProviderId, own: SendLimits | null | undefined): Required<SendLimits> {
  const published = PROVIDERS[providerId].sendLimits ?? {};
  return {
    perIntegration: own?.perIntegration ?? published.perIntegration ?? [],
    perDestination: own?.perDestination ?? published.perDestination ?? [],
  };
}

/** Whether a credential of this provider must never be shown, even partly. Unknown names count as secret. */
export function isSecretCredential(providerId: ProviderId, name: string): boolean {
  const spec = PROVIDERS[providerId].credentials[name as CredentialName];
  return !spec || spec.secret === true;
}

/** A token that can stand in an HTTP header value as it is. */
const HEADER_TOKEN = /^[\x21-\x7e]+$/;

function isBlank(value: unknown): boolean {
  return value === undefined || value === null || (typeof value === 'string' && value.trim() === '');
}

/**
 * Checks the fields against a provider's list: each required one that is missing (or blank), each
 * one the provider does not take, and each destination Herald may not reach (`allowedNetworks`
 * widens what it may) is one problem. Messages name fields, never their values.
 */
function checkFields(
  providerId: ProviderId,
  specs: Partial<Record<string, { required?: boolean; destination?: 'url' | 'host'; header?: boolean }>>,
  given: Record<string, unknown>,
  at: string,
  allowedNetworks: readonly string[],
): CredentialProblem[] {
  const problems: CredentialProblem[] = [];
  for (const [name, spec] of Object.entries(specs)) {
    if (spec?.required && isBlank(given[name])) problems.push({ field: `${at}/${name}`, message: `is required by ${providerId}` });
    else if (spec?.destination && !isBlank(given[name])) {
      const value = String(given[name]);
      const problem = spec.destination === 'url' ? urlProblem(value, allowedNetworks) : hostProblem(value, allowedNetworks);
      if (problem) problems.push({ field: `${at}/${name}`, message: problem });
    } else if (spec?.header && !isBlank(given[name]) && !HEADER_TOKEN.test(String(given[name]))) {
      problems.push({ field: `${at}/${name}`, message: 'must be printable ASCII without spaces: it is sent in an HTTP header' });
    }
  }
  for (const name of Object.keys(given)) {
    if (!(name in specs)) problems.push({ field: `${at}/${name}`, message: `is not used by ${providerId}` });
  }
  return problems;
}

/**
 * The problems with an integration's credentials for a provider, as the error body's `details`
 * (empty when they are fine). `at` is where the object sits in the request.
 */
export function checkIntegrationCredentials(
  providerId: ProviderId,
  credentials: IntegrationCredentials | undefined,
  allowedNetworks: readonly string[],
  at = 'body/credentials',
): CredentialProblem[] {
  const given = (credentials ?? {}) as Record<string, unknown>;
  const problems = checkFields(providerId, PROVIDERS[providerId].credentials, given, at, allowedNetworks);
  // The contract lets `port` be a string of digits, which its schema cannot bound.
  if (given.port !== undefined && !isBlank(given.port) && 'port' in PROVIDERS[providerId].credentials) {
    const port = Number(given.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      problems.push({ field: `${at}/port`, message: 'must be a port number from 1 to 65535' });
    }
  }
  return problems;
}

/**
 * The problems with a subscriber's credentials for a chat or push provider, as `details`. A
 * provider that takes no subscriber credentials (email, SMS, in-app) is itself the problem.
 */
export function checkSubscriberCredentials(
  providerId: ProviderId,
  credentials: ChannelCredentials | undefined,
  allowedNetworks: readonly string[],
  at = 'body/credentials',
): CredentialProblem[] {
  const specs = PROVIDERS[providerId].subscriberCredentials;
  if (!specs) return [{ field: 'body/providerId', message: `${providerId} is not a chat or push provider` }];
  return checkFields(providerId, specs, (credentials ?? {}) as Record<string, unknown>, at, allowedNetworks);
}
