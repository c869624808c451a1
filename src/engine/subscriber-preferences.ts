// A subscriber's preferences as the API reads and changes them: the global layer, and per active
// workflow the effective preference (engine/preferences.ts) with the workflow shown as Novu's
// template.
import type { Deps } from '../deps.js';
import type { Body, Schemas } from '../contract.js';
import { badRequest } from '../errors.js';
import { activeWorkflows, findWorkflow, type StoredWorkflow } from '../db/repos/workflows.js';
import * as repo from '../db/repos/preferences.js';
import type { LayerChange } from '../db/repos/preferences.js';
import { effectivePreference, globalPreference } from './preferences.js';
import { existingSubscriberKey } from './subscribers.js';
import { workflowNotFound } from './workflows.js';

type WorkflowPreference = Schemas['WorkflowPreference'];

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

/** The subscriber's effective preference for each active workflow of the environment. */
export async function workflowPreferences(
  deps: Deps,
  environmentId: string,
  subscriberId: string,
  includeInactiveChannels?: boolean,
): Promise<WorkflowPreference[]> {
  const key = await existingSubscriberKey(deps.db, environmentId, subscriberId);
  const [workflows, global, own] = await Promise.all([
    activeWorkflows(deps.db, environmentId),
    repo.globalLayer(deps.db, key),
    repo.workflowLayers(deps.db, key),
  ]);
  return workflows.map((workflow) => ({
    template: template(workflow),
    preference: effectivePreference(workflow, global, own.get(workflow.id) ?? { channels: {} }, includeInactiveChannels),
  }));
}

export async function globalPreferences(deps: Deps, environmentId: string, subscriberId: string) {
  const key = await existingSubscriberKey(deps.db, environmentId, subscriberId);
  return { preference: globalPreference(await repo.globalLayer(deps.db, key)) };
}

/**
 * Changes the global layer, or the subscriber's own layer of one workflow when the body names it,
 * and answers the preference that results.
 */
export async function updatePreferences(deps: Deps, environmentId: string, subscriberId: string, body: Body<'updateSubscriberPreferences'>) {
  const key = await existingSubscriberKey(deps.db, environmentId, subscriberId);
  // The map form and Novu's list form say the same thing; the list wins where both name a channel.
  const change: LayerChange = { enabled: body.enabled, channels: { ...body.channels } };
  for (const { type, enabled } of body.preferences ?? []) change.channels[type] = enabled;
  if (change.enabled === undefined && Object.keys(change.channels).length === 0) {
    throw badRequest('Nothing to change: give enabled, channels or preferences', [
      { field: 'body', message: 'needs enabled, channels or preferences' },
    ]);
  }
  const now = deps.clock.now();
  if (body.workflowId === undefined) {
    const global = await repo.saveGlobalLayer(deps.db, key, change, now);
    return { preference: globalPreference(global) };
  }
  const workflow = await findWorkflow(deps.db, environmentId, body.workflowId);
  if (!workflow) throw workflowNotFound(body.workflowId);
  const own = await repo.saveWorkflowLayer(deps.db, key, workflow.id, change, now);
  const preference = effectivePreference(workflow, await repo.globalLayer(deps.db, key), own);
  return { template: template(workflow), preference };
}
