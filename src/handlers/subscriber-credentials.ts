import type { OperationHandler } from '../http/types.js';
import { notFound, unprocessable } from '../errors.js';
import { readBool } from '../db/json.js';
import { findIntegrationByIdentifier, activeIntegrationOf } from '../db/repos/integrations.js';
import { upsertSubscriberChannel } from '../db/repos/subscriber-channels.js';
import { findSubscriber, subscriberKey } from '../db/repos/subscribers.js';
import { checkSubscriberCredentials } from '../providers/catalogue.js';

const missing = (subscriberId: string) => notFound(`Subscriber ${subscriberId} not found`);

/** A row that points at a subscriber or integration deleted meanwhile, in SQLite's words or PostgreSQL's. */
function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || code === '23503';
}

export const updateSubscriberCredentials: OperationHandler<'updateSubscriberCredentials'> = async ({ params, body, auth, deps }) => {
  const environmentId = auth.environmentId;
  const { providerId, integrationIdentifier } = body;
  const now = deps.clock.now();
  try {
    await deps.db.transaction(async (trx) => {
      const key = await subscriberKey(trx, environmentId, params.subscriberId);
      if (!key) throw missing(params.subscriberId);

      const problems = checkSubscriberCredentials(providerId, body.credentials);
      if (problems.length > 0) {
        const summary = problems.map((p) => `${p.field.replace(/^body\//, '')} ${p.message}`).join('; ');
        throw unprocessable(`The credentials do not fit ${providerId}: ${summary}`, problems);
      }

      // Held FOR KEY SHARE until the credentials are written, so the integration cannot be deleted in between.
      let integration;
      if (integrationIdentifier !== undefined) {
        integration = await findIntegrationByIdentifier(trx, environmentId, integrationIdentifier, { forKeyShare: true });
        if (!integration || integration.provider_id !== providerId) {
          throw unprocessable(`No ${providerId} integration has the identifier ${integrationIdentifier}`, [
            { field: 'body/integrationIdentifier', message: `is not the identifier of a ${providerId} integration` },
          ]);
        }
        if (!readBool(integration.active)) {
          throw unprocessable(`Integration ${integrationIdentifier} is not active`, [
            { field: 'body/integrationIdentifier', message: 'names an inactive integration' },
          ]);
        }
      } else {
        integration = await activeIntegrationOf(trx, environmentId, providerId, { forKeyShare: true });
        if (!integration) {
          throw unprocessable(`No active ${providerId} integration in this environment`, [
            { field: 'body/providerId', message: `has no active integration in this environment` },
          ]);
        }
      }

      await upsertSubscriberChannel(
        trx,
        { subscriberKey: key, integrationId: integration.id, providerId, credentials: body.credentials },
        now,
      );
    });
  } catch (err) {
    // Only the subscriber can vanish under us: the integration is locked.
    if (isForeignKeyViolation(err)) throw missing(params.subscriberId);
    throw err;
  }
  const subscriber = await findSubscriber(deps.db, environmentId, params.subscriberId);
  if (!subscriber) throw missing(params.subscriberId);
  return { status: 200, body: { data: subscriber } };
};
