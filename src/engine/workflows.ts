// Workflows as the API writes them: a workflowId made from the name when none is given, steps and
// payloadSchema checked together (engine/workflow-rules.ts), and the defaults a new workflow gets.
import type { Deps } from '../deps.js';
import type { Body, ErrorDetail } from '../contract.js';
import { conflict, notFound, unprocessable } from '../errors.js';
import { isUniqueViolation } from '../db/errors.js';
import * as repo from '../db/repos/workflows.js';
import { normalizeSteps, payloadSchemaProblems, slugify } from './workflow-rules.js';

export const workflowNotFound = (workflowId: string) => notFound(`Workflow ${workflowId} not found`);

/** The workflow a path names by its workflowId or its `_id` (repo: findWorkflowByEitherId); 404 when none. */
async function named(deps: Deps, environmentId: string, workflowIdOrId: string): Promise<repo.StoredWorkflow> {
  const workflow = await repo.findWorkflowByEitherId(deps.db, environmentId, workflowIdOrId);
  if (!workflow) throw workflowNotFound(workflowIdOrId);
  return workflow;
}

function rejectIfAny(problems: ErrorDetail[]): void {
  if (problems.length > 0) {
    throw unprocessable(problems.map((p) => `${p.field} ${p.message}`).slice(0, 5).join('; '), problems);
  }
}

/** Checks steps and payloadSchema together, so one answer lists every problem. */
async function checkedContent(body: { steps?: repo.Step[]; payloadSchema?: object | null }) {
  const { steps, problems } = await normalizeSteps(body.steps ?? []);
  if (body.payloadSchema) problems.push(...(await payloadSchemaProblems(body.payloadSchema)));
  rejectIfAny(problems);
  return steps;
}

/** The workflow as the API shows it, once it is known to exist. */
async function stored(deps: Deps, environmentId: string, workflowId: string): Promise<repo.Workflow> {
  return repo.toWire((await repo.findWorkflow(deps.db, environmentId, workflowId))!);
}

export async function createWorkflow(deps: Deps, environmentId: string, body: Body<'createWorkflow'>): Promise<repo.Workflow> {
  const workflowId = body.workflowId ?? slugify(body.name);
  if (!workflowId) {
    throw unprocessable('name has no letters a to z or digits (accents aside) to make a workflowId of; give one in workflowId', [
      { field: 'body/workflowId', message: 'is required when name has no letters a to z or digits' },
    ]);
  }
  const steps = await checkedContent(body);
  try {
    await repo.insertWorkflow(
      deps.db,
      environmentId,
      workflowId,
      {
        name: body.name,
        description: body.description,
        tags: body.tags ?? [],
        active: body.active ?? true,
        critical: body.critical ?? false,
        steps,
        payloadSchema: body.payloadSchema ?? undefined,
        preferenceSettings: { ...repo.ALL_CHANNELS_ON, ...body.preferenceSettings },
      },
      deps.clock.now(),
    );
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`Workflow ${workflowId} already exists`);
    throw err;
  }
  return stored(deps, environmentId, workflowId);
}

export async function getWorkflow(deps: Deps, environmentId: string, workflowIdOrId: string): Promise<repo.Workflow> {
  return repo.toWire(await named(deps, environmentId, workflowIdOrId));
}

/** Changes what the body gives; preferenceSettings merge into the current ones. */
export async function updateWorkflow(deps: Deps, environmentId: string, workflowIdOrId: string, body: Body<'updateWorkflow'>): Promise<repo.Workflow> {
  const current = await named(deps, environmentId, workflowIdOrId);
  const { workflowId } = current;
  const steps = body.steps === undefined ? undefined : await checkedContent(body);
  if (body.steps === undefined && body.payloadSchema) rejectIfAny(await payloadSchemaProblems(body.payloadSchema));
  const values: Partial<repo.WorkflowValues> = {
    name: body.name,
    tags: body.tags,
    critical: body.critical,
    steps,
    preferenceSettings: body.preferenceSettings && { ...current.preferenceSettings, ...body.preferenceSettings } as repo.ChannelPreferences,
  };
  if (body.description !== undefined) values.description = body.description;
  if (body.payloadSchema !== undefined) values.payloadSchema = body.payloadSchema ?? undefined;
  await repo.updateWorkflow(deps.db, environmentId, workflowId, values, deps.clock.now());
  return stored(deps, environmentId, workflowId);
}

export async function setWorkflowStatus(deps: Deps, environmentId: string, workflowIdOrId: string, active: boolean): Promise<repo.Workflow> {
  const { workflowId } = await named(deps, environmentId, workflowIdOrId);
  if (!(await repo.updateWorkflow(deps.db, environmentId, workflowId, { active }, deps.clock.now()))) throw workflowNotFound(workflowIdOrId);
  return stored(deps, environmentId, workflowId);
}

/** Deletes the workflow a path names by its workflowId or its `_id`. */
export async function deleteWorkflow(deps: Deps, environmentId: string, workflowIdOrId: string): Promise<void> {
  const { id } = await named(deps, environmentId, workflowIdOrId);
  if (!(await repo.deleteWorkflow(deps.db, environmentId, id))) throw workflowNotFound(workflowIdOrId);
}
