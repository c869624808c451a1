// Integrations as the API changes them, and the rules they keep: a provider's channel and
// credentials, one identifier per environment, and at most one primary integration per channel,
// always an active one.
import { randomBytes } from 'node:crypto';
import type { Deps } from '../deps.js';
import type { Body } from '../contract.js';
import { conflict, notFound, unprocessable } from '../errors.js';
import { isSealed } from '../crypto.js';
import { isUniqueViolation } from '../db/errors.js';
import { readBool } from '../db/json.js';
import type { Transaction } from '../db/knex.js';
import * as repo from '../db/repos/integrations.js';
import {
  checkIntegrationCredentials,
  providerEntry,
  type IntegrationCredentials,
  type ProviderId,
} from '../providers/catalogue.js';

const missing = (integrationId: string) => notFound(`Integration ${integrationId} not found`);
const identifierClash = (identifier: string) => conflict(`Integration identifier ${identifier} already exists`);
const inactivePrimary = () =>
  unprocessable('An inactive integration cannot be primary', [{ field: 'body/primary', message: 'cannot be true while active is false' }]);

/** In-app messages are stored, not sent through a provider: there is nothing to pace. */
function checkSendLimits(providerId: ProviderId, sendLimits: unknown): void {
  if (providerId === 'herald' && sendLimits) {
    throw unprocessable('In-app messages are stored by Herald, not sent: they take no send limits', [
      { field: 'body/sendLimits', message: 'is not taken by herald' },
    ]);
  }
}

/** 422 naming each credential the provider needs and lacks, or does not take. Values are never quoted. */
function checkCredentials(deps: Deps, providerId: ProviderId, credentials: IntegrationCredentials | undefined): void {
  const problems = checkIntegrationCredentials(providerId, credentials, deps.config.outbound.allowedNetworks);
  if (problems.length === 0) return;
  const summary = problems.map((p) => `${p.field.slice('body/credentials/'.length)} ${p.message}`).join('; ');
  throw unprocessable(`The credentials do not fit ${providerId}: ${summary}`, problems);
}

/**
 * Runs integration writes of one environment in a transaction that holds the environment's lock,
 * so the one-primary-per-channel and unique-identifier checks cannot race. A duplicate identifier
 * that still slips through surfaces as the same 409.
 */
async function writing<T>(deps: Deps, environmentId: string, identifier: string | undefined, work: (trx: Transaction) => Promise<T>): Promise<T> {
  try {
    return await deps.db.transaction(async (trx) => {
      await repo.lockIntegrations(trx, environmentId);
      return work(trx);
    });
  } catch (err) {
    if (identifier !== undefined && isUniqueViolation(err)) throw identifierClash(identifier);
    throw err;
  }
}

/** The integration's row, or a 404. */
async function existing(trx: Transaction, environmentId: string, integrationId: string): Promise<repo.IntegrationRow> {
  const row = await repo.findIntegrationRow(trx, environmentId, integrationId);
  if (!row) throw missing(integrationId);
  return row;
}

async function freeIdentifier(trx: Transaction, environmentId: string, providerId: ProviderId): Promise<string> {
  for (;;) {
    const identifier = `${providerId}-${randomBytes(3).toString('hex')}`;
    if (!(await repo.identifierTaken(trx, environmentId, identifier))) return identifier;
  }
}

/**
 * The primary rules, applied after an integration's status or flag changed: an inactive
 * integration is never primary, and when it loses the flag the oldest other active one of its
 * channel takes it; `primary: true` takes the flag from the channel's previous primary;
 * `primary: false` hands it on the same way; an integration that becomes active is made primary
 * when its channel has none.
 */
async function applyPrimaryRules(
  trx: Transaction,
  environmentId: string,
  row: Pick<repo.IntegrationRow, 'id' | 'channel'>,
  change: { wasActive: boolean; active: boolean; primary?: boolean },
  now: Date,
): Promise<void> {
  const { id, channel } = row;
  if (!change.active || change.primary === false) {
    if (await repo.clearPrimary(trx, environmentId, id, now)) await repo.promoteOldestActive(trx, environmentId, channel, id, now);
  } else if (change.primary === true) {
    await repo.setPrimary(trx, environmentId, id, channel, now);
  } else if (!change.wasActive && !(await repo.primaryOf(trx, environmentId, channel))) {
    await repo.setPrimary(trx, environmentId, id, channel, now);
  }
}

/** Rows written before the server had a secret are sealed on their next write. */
function resealed(row: repo.IntegrationRow, secret: string | undefined): IntegrationCredentials | undefined {
  return secret && !isSealed(String(row.credentials)) ? repo.readCredentials(row, secret) : undefined;
}

export async function createIntegration(deps: Deps, environmentId: string, body: Body<'createIntegration'>): Promise<repo.Integration> {
  const provider = providerEntry(body.providerId);
  if (body.channel !== undefined && body.channel !== provider.channel) {
    throw unprocessable(`${provider.id} delivers ${provider.channel}, not ${body.channel}`, [
      { field: 'body/channel', message: `must be ${provider.channel} for ${provider.id}` },
    ]);
  }
  const active = body.active ?? true;
  if (body.primary === true && !active) throw inactivePrimary();
  checkCredentials(deps, provider.id, body.credentials);
  checkSendLimits(provider.id, body.sendLimits);

  const now = deps.clock.now();
  const secret = deps.config.secret;
  return writing(deps, environmentId, body.identifier, async (trx) => {
    if (body.identifier !== undefined && (await repo.identifierTaken(trx, environmentId, body.identifier))) {
      throw identifierClash(body.identifier);
    }
    const input: repo.IntegrationInsert = {
      providerId: provider.id,
      channel: provider.channel,
      name: body.name ?? provider.displayName,
      identifier: body.identifier ?? (await freeIdentifier(trx, environmentId, provider.id)),
      credentials: body.credentials ?? {},
      active,
      sendLimits: body.sendLimits,
    };
    const id = await repo.insertIntegration(trx, environmentId, input, now, secret);
    await applyPrimaryRules(trx, environmentId, { id, channel: provider.channel }, { wasActive: false, active, primary: body.primary }, now);
    return (await repo.findIntegration(trx, environmentId, id, secret))!;
  });
}

export async function updateIntegration(
  deps: Deps,
  environmentId: string,
  integrationId: string,
  body: Body<'updateIntegration'>,
): Promise<repo.Integration> {
  const now = deps.clock.now();
  const secret = deps.config.secret;
  return writing(deps, environmentId, body.identifier, async (trx) => {
    const row = await existing(trx, environmentId, integrationId);
    const wasActive = readBool(row.active);
    const active = body.active ?? wasActive;
    if (body.primary === true && !active) throw inactivePrimary();
    if (body.credentials !== undefined) checkCredentials(deps, row.provider_id, body.credentials);
    checkSendLimits(row.provider_id, body.sendLimits);
    if (body.identifier !== undefined && (await repo.identifierTaken(trx, environmentId, body.identifier, row.id))) {
      throw identifierClash(body.identifier);
    }
    await repo.updateIntegrationRow(
      trx,
      environmentId,
      row.id,
      { name: body.name, identifier: body.identifier, active: body.active, credentials: body.credentials ?? resealed(row, secret), sendLimits: body.sendLimits },
      now,
      secret,
    );
    await applyPrimaryRules(trx, environmentId, row, { wasActive, active, primary: body.primary }, now);
    return (await repo.findIntegration(trx, environmentId, row.id, secret))!;
  });
}

export async function setIntegrationStatus(deps: Deps, environmentId: string, integrationId: string, active: boolean): Promise<repo.Integration> {
  const now = deps.clock.now();
  const secret = deps.config.secret;
  return writing(deps, environmentId, undefined, async (trx) => {
    const row = await existing(trx, environmentId, integrationId);
    const wasActive = readBool(row.active);
    // The same status again changes nothing, not even updatedAt.
    if (wasActive !== active) {
      await repo.updateIntegrationRow(trx, environmentId, row.id, { active, credentials: resealed(row, secret) }, now, secret);
      await applyPrimaryRules(trx, environmentId, row, { wasActive, active }, now);
    }
    return (await repo.findIntegration(trx, environmentId, row.id, secret))!;
  });
}

/** Deletes the integration, hands its primary flag on, and answers the integrations that remain. */
export async function deleteIntegration(deps: Deps, environmentId: string, integrationId: string): Promise<repo.Integration[]> {
  const now = deps.clock.now();
  const secret = deps.config.secret;
  return writing(deps, environmentId, undefined, async (trx) => {
    const row = await existing(trx, environmentId, integrationId);
    await repo.deleteIntegrationRow(trx, environmentId, row.id);
    if (row.primary_channel !== null) await repo.promoteOldestActive(trx, environmentId, row.channel, row.id, now);
    return repo.allIntegrations(trx, environmentId, secret);
  });
}
