import type { Knex } from 'knex';
import * as accounts from './20261122_01_accounts.js';
import * as subscribers from './20261122_02_subscribers.js';
import * as workflows from './20261122_03_workflows.js';
import * as topics from './20261122_04_topics.js';
import * as integrations from './20261122_05_integrations.js';
import * as preferences from './20261122_06_preferences.js';
import * as engine from './20261122_07_engine.js';
import * as dashboard from './20261122_20_dashboard.js';
import * as rateLimits from './20261122_30_rate_limits.js';
import * as idempotency from './20261122_31_idempotency.js';
import * as jobIndexes from './20261124_40_job_indexes.js';
import * as jobLanes from './20261125_50_job_lanes.js';
import * as throttles from './20261125_80_throttles.js';
import * as inboxMessages from './20261125_81_inbox_messages.js';
import * as inboxEvents from './20261125_82_inbox_events.js';
import * as inboxSecrets from './20261125_83_inbox_secrets.js';
import * as inboxTickets from './20261125_84_inbox_tickets.js';
import * as webhookEndpoints from './20261125_85_webhook_endpoints.js';
import * as webhookDeliveries from './20261125_86_webhook_deliveries.js';
import * as webhookAttempts from './20261125_87_webhook_attempts.js';
import * as notificationListIndexes from './20261125_89_notification_list_indexes.js';
import * as notificationCounts from './20261125_90_notification_counts.js';
import * as retentionDays from './20261125_91_retention_days.js';
import * as retentionIndexes from './20261125_92_retention_indexes.js';
import * as sendLimits from './20261125_97_send_limits.js';
import * as webhookRetention from './20261125_98_webhook_retention.js';
import * as inboxSessions from './20261127_01_inbox_sessions.js';
import * as notificationFacetCounts from './20261127_02_notification_facet_counts.js';
import * as dueSendsByEnvironment from './20261128_01_due_sends_by_environment.js';
import * as inAppLane from './20261206_01_in_app_lane.js';
import * as notificationHourCounts from './20261206_02_notification_hour_counts.js';
import * as facetDeletesByKey from './20261206_03_facet_deletes_by_key.js';
import * as openFanouts from './20261206_04_open_fanouts.js';
import * as sendGate from './20261206_05_send_gate.js';
import * as inboxMessageTimes from './20261207_01_inbox_message_times.js';
import * as ticketCredentials from './20261207_02_ticket_credentials.js';
import * as webhookTestsFirst from './20261207_03_webhook_tests_first.js';
import * as webhookDeliveriesDueByEndpoint from './20261207_04_webhook_deliveries_due_by_endpoint.js';
import * as webhookDeliveryTurns from './20261207_05_webhook_delivery_turns.js';
import * as sendTurnFractions from './20261207_06_send_turn_fractions.js';
import * as workflowSnapshots from './20261208_01_workflow_snapshots.js';

/**
 * Every migration, in order. Listed here rather than found on disk so they load the same way under
 * tsx, vitest and compiled JavaScript. Append only: a shipped migration never changes.
 */
const migrations: Record<string, Knex.Migration> = {
  '20261122_01_accounts': accounts,
  '20261122_02_subscribers': subscribers,
  '20261122_03_workflows': workflows,
  '20261122_04_topics': topics,
  '20261122_05_integrations': integrations,
  '20261122_06_preferences': preferences,
  '20261122_07_engine': engine,
  '20261122_20_dashboard': dashboard,
  '20261122_30_rate_limits': rateLimits,
  '20261122_31_idempotency': idempotency,
  '20261124_40_job_indexes': jobIndexes,
  '20261125_50_job_lanes': jobLanes,
  '20261125_80_throttles': throttles,
  '20261125_81_inbox_messages': inboxMessages,
  '20261125_82_inbox_events': inboxEvents,
  '20261125_83_inbox_secrets': inboxSecrets,
  '20261125_84_inbox_tickets': inboxTickets,
  '20261125_85_webhook_endpoints': webhookEndpoints,
  '20261125_86_webhook_deliveries': webhookDeliveries,
  '20261125_87_webhook_attempts': webhookAttempts,
  '20261125_89_notification_list_indexes': notificationListIndexes,
  '20261125_90_notification_counts': notificationCounts,
  '20261125_91_retention_days': retentionDays,
  '20261125_92_retention_indexes': retentionIndexes,
  '20261125_97_send_limits': sendLimits,
  '20261125_98_webhook_retention': webhookRetention,
  '20261127_01_inbox_sessions': inboxSessions,
  '20261127_02_notification_facet_counts': notificationFacetCounts,
  '20261128_01_due_sends_by_environment': dueSendsByEnvironment,
  '20261206_01_in_app_lane': inAppLane,
  '20261206_02_notification_hour_counts': notificationHourCounts,
  '20261206_03_facet_deletes_by_key': facetDeletesByKey,
  '20261206_04_open_fanouts': openFanouts,
  '20261206_05_send_gate': sendGate,
  '20261207_01_inbox_message_times': inboxMessageTimes,
  '20261207_02_ticket_credentials': ticketCredentials,
  '20261207_03_webhook_tests_first': webhookTestsFirst,
  '20261207_04_webhook_deliveries_due_by_endpoint': webhookDeliveriesDueByEndpoint,
  '20261207_05_webhook_delivery_turns': webhookDeliveryTurns,
  '20261207_06_send_turn_fractions': sendTurnFractions,
  '20261208_01_workflow_snapshots': workflowSnapshots,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name],
};
