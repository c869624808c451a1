// A subscriber's chat or push credentials for one integration: checked against the provider, and
// written against an integration that cannot be deleted meanwhile.
import type { Deps } from '../deps.js';
import type { Body } from '../contract.js';
import { unprocessable } from '../errors.js';
import { isForeignKeyViolation } from '../db/errors.js';
import { readBool } from '../db/json.js';
import type { Transaction } from '../db/knex.js';
import { findIntegrationByIdentifier, activeIntegrationOf, type IntegrationRow } from '../db/repos/integrations.js';
import { upsertSubscriberChannel } from '../db/repos/subscriber-channels.js';
import { findSubscriber, type Subscriber } from '../db/repos/subscribers.js';
import { checkSubscriberCredentials, type ProviderId } from '../providers/catalogue.js';
import { existingSubscriberKey, subscriberNotFound } from './subscribers.js';

type CredentialsUpdate = Body<'updateSubscriberCredentials'>;

function checkCredentials(deps: Deps, providerId: ProviderId, credentials: CredentialsUpdate['credentials']): void {
  const problems = checkSubscriberCredentials(providerId, credentials, deps.config.outbound.allowedNetworks);
  if (problems.length === 0) return;
  const summary = problems.map((p) => `${p.field.replace(/^body\//, '')} ${p.message}`).join('; ');
  throw unprocessable(`The credentials do not fit ${providerId}: ${summary}`, problems);
}

/**
 * The integration the credentials go to: the one named by identifier, which must be an active one of
 * the provider, else the provider's default (activeIntegrationOf). Held FOR KEY SHARE until the
 * credentials are written, so the integration cannot be deleted in between.
 */
async function targetIntegration(trx: Transaction, environmentId: string, providerId: ProviderId, identifier: string | undefined): Promise<IntegrationRow> {
  if (identifier === undefined) {
    const integration = await activeIntegrationOf(trx, environmentId, providerId, { forKeyShare: true });
    if (!integration) {
      throw unprocessable(`No active ${providerId} integration in this environment`, [
        { field: 'body/providerId', message: `has no active integration in this environment` },
      ]);
    }
    return integration;
  }
  const integration = await findIntegrationByIdentifier(trx, environmentId, identifier, { forKeyShare: true });
  if (!integration || integration.provider_id !== providerId) {
    throw unprocessable(`No ${providerId} integration has the identifier ${identifier}`, [
      { field: 'body/integrationIdentifier', message: `is not the identifier of a ${providerId} integration` },
    ]);
  }
  if (!readBool(integration.active)) {
    throw unprocessable(`Integration ${identifier} is not active`, [{ field: 'body/integrationIdentifier', message: 'names an inactive integration' }]);
  }
  return integration;
}

/** Sets the subscriber's credentials for one integration of the provider, and answers the subscriber. */
export async function setSubscriberCredentials(deps: Deps, environmentId: string, subscriberId: string, body: CredentialsUpdate): Promise<Subscriber> {
  const { providerId, integrationIdentifier } = body;
  const now = deps.clock.now();
  try {
    await deps.db.transaction(async (trx) => {
      const key = await existingSubscriberKey(trx, environmentId, subscriberId);
      checkCredentials(deps, providerId, body.credentials);
      const integration = await targetIntegration(trx, environmentId, providerId, integrationIdentifier);
      await upsertSubscriberChannel(trx, { subscriberKey: key, integrationId: integration.id, providerId, credentials: body.credentials }, now, deps.config.secret);
    });
  } catch (err) {
    // Only the subscriber can vanish under us: the integration is locked.
    if (isForeignKeyViolation(err)) throw subscriberNotFound(subscriberId);
    throw err;
  }
  // Read only to be answered: a large `data` as stored, not parsed (db/json.ts setStoredJson).
  const subscriber = await findSubscriber(deps.db, environmentId, subscriberId, true);
  if (!subscriber) throw subscriberNotFound(subscriberId);
  return subscriber;
}
