import type { OperationHandlers } from '../http/types.js';
import * as events from './events.js';
import * as inbox from './inbox.js';
import * as integrations from './integrations.js';
import * as messages from './messages.js';
import * as notifications from './notifications.js';
import * as preferences from './preferences.js';
import * as subscriberCredentials from './subscriber-credentials.js';
import * as subscribers from './subscribers.js';
import * as topics from './topics.js';
import * as webhooks from './webhooks.js';
import * as workflows from './workflows.js';

/** Every operation of the contract, by operationId; `satisfies` makes a missing one a type error. */
export const handlers = {
  ...events,
  ...subscribers,
  ...preferences,
  ...subscriberCredentials,
  ...messages,
  ...workflows,
  ...topics,
  ...notifications,
  ...integrations,
  ...inbox,
  ...webhooks,
} satisfies OperationHandlers;
