import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/integrations.js';
import * as integrations from '../engine/integrations.js';

export const listIntegrations: OperationHandler<'listIntegrations'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await repo.listIntegrations(
    deps.db,
    auth.environmentId,
    pageRequest(query),
    { includeInactive: query?.includeInactive === true, channel: query?.channel },
    deps.config.secret,
  ),
});

export const createIntegration: OperationHandler<'createIntegration'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await integrations.createIntegration(deps, auth.environmentId, body) },
});

export const updateIntegration: OperationHandler<'updateIntegration'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await integrations.updateIntegration(deps, auth.environmentId, params.integrationId, body) },
});

export const updateIntegrationStatus: OperationHandler<'updateIntegrationStatus'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await integrations.setIntegrationStatus(deps, auth.environmentId, params.integrationId, body.active) },
});

export const deleteIntegration: OperationHandler<'deleteIntegration'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await integrations.deleteIntegration(deps, auth.environmentId, params.integrationId) },
});
