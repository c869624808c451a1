import type { OperationHandler } from '../http/types.js';
import type { Schemas } from '../contract.js';
import { badRequest, notFound } from '../errors.js';
import { subscriberKey } from '../db/repos/subscribers.js';
import { activeWorkflows, findWorkflow, type StoredWorkflow } from '../db/repos/workflows.js';
import * as repo from '../db/repos/preferences.js';
import { effectivePreference, globalPreference } from '../engine/preferences.js';
import type { Layer } from '../db/repos/preferences.js';
import type { Deps } from '../deps.js';

/** Novu's `triggers[].variables` names the payload fields; ours come from the payloadSchema. */
const VARIABLE_TYPES: Record<string, string> = {
  string: 'String',
  number: 'Number',
  integer: 'Number',
  boolean: 'Boolean',
  array: 'Array',
  object: 'Object',
};

function template(workflow: StoredWorkflow): Schemas['PreferenceWorkflow'] {
  const properties = (workflow.payloadSchema as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties ?? {};
  const variables = Object.entries(properties).map(([name, schema]) => {
    const type = typeof schema?.type === 'string' ? VARIABLE_TYPES[schema.type] : undefined;
    return type ? { name, type } : { name };
  });
  return {
    _id: workflow.workflowId,
    workflowId: workflow.workflowId,
    name: workflow.name,
    critical: workflow.critical,
    triggers: [{ type: 'event', identifier: workflow.workflowId, variables }],
  };
}

async function subscriberKeyOrThrow(deps: Deps, environmentId: string, subscriberId: string): Promise<string> {
  const key = await subscriberKey(deps.db, environmentId, subscriberId);
  if (!key) throw notFound(`Subscriber ${subscriberId} not found`);
  return key;
}

export const getSubscriberPreferences: OperationHandler<'getSubscriberPreferences'> = async ({ params, query, auth, deps }) => {
  const key = await subscriberKeyOrThrow(deps, auth.environmentId, params.subscriberId);
  const [workflows, global, own] = await Promise.all([
    activeWorkflows(deps.db, auth.environmentId),
    repo.globalLayer(deps.db, key),
    repo.workflowLayers(deps.db, key),
  ]);
  const data = workflows.map((workflow) => ({
    template: template(workflow),
    preference: effectivePreference(workflow, global, own.get(workflow.id) ?? { channels: {} }, query.includeInactiveChannels),
  }));
  return { status: 200, body: { data } };
};

export const getSubscriberGlobalPreferences: OperationHandler<'getSubscriberGlobalPreferences'> = async ({ params, auth, deps }) => {
  const key = await subscriberKeyOrThrow(deps, auth.environmentId, params.subscriberId);
  return { status: 200, body: { data: { preference: globalPreference(await repo.globalLayer(deps.db, key)) } } };
};

export const updateSubscriberPreferences: OperationHandler<'updateSubscriberPreferences'> = async ({ params, body, auth, deps }) => {
  const key = await subscriberKeyOrThrow(deps, auth.environmentId, params.subscriberId);
  // The map form and Novu's list form say the same thing; the list wins where both name a channel.
  const change: Layer = { enabled: body.enabled, channels: { ...body.channels } };
  for (const { type, enabled } of body.preferences ?? []) change.channels[type] = enabled;
  if (change.enabled === undefined && Object.keys(change.channels).length === 0) {
    throw badRequest('Nothing to change: give enabled, channels or preferences', [
      { field: 'body', message: 'needs enabled, channels or preferences' },
    ]);
  }
  const now = deps.clock.now();
  if (body.workflowId === undefined) {
    const global = await repo.saveGlobalLayer(deps.db, key, change, now);
    return { status: 200, body: { data: { preference: globalPreference(global) } } };
  }
  const workflow = await findWorkflow(deps.db, auth.environmentId, body.workflowId);
  if (!workflow) throw notFound(`Workflow ${body.workflowId} not found`);
  const own = await repo.saveWorkflowLayer(deps.db, key, workflow.id, change, now);
  const preference = effectivePreference(workflow, await repo.globalLayer(deps.db, key), own);
  return { status: 200, body: { data: { template: template(workflow), preference } } };
};
