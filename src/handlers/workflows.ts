import type { OperationHandler } from '../http/types.js';
import type { Db } from '../db/knex.js';
import { conflict, notFound, unprocessable } from '../errors.js';
import type { ErrorDetail } from '../contract.js';
import { isUniqueViolation } from '../db/errors.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/workflows.js';
import { normalizeSteps, payloadSchemaProblems, slugify } from '../engine/workflow-rules.js';

const missing = (workflowId: string) => notFound(`Workflow ${workflowId} not found`);

function rejectIfAny(problems: ErrorDetail[]): void {
  if (problems.length > 0) {
    throw unprocessable(problems.map((p) => `${p.field} ${p.message}`).slice(0, 5).join('; '), problems);
  }
}

/** Checks steps and payloadSchema together, so one answer lists every problem. */
function checkedContent(body: { steps?: repo.Step[]; payloadSchema?: object | null }) {
  const { steps, problems } = normalizeSteps(body.steps ?? []);
  if (body.payloadSchema) problems.push(...payloadSchemaProblems(body.payloadSchema));
  rejectIfAny(problems);
  return steps;
}

async function reply(db: Db, environmentId: string, workflowId: string) {
  return repo.toWire((await repo.findWorkflow(db, environmentId, workflowId))!);
}

export const listWorkflows: OperationHandler<'listWorkflows'> = async ({ query, auth, deps }) => ({
  status: 200,
  body: await repo.listWorkflows(deps.db, auth.environmentId, pageRequest(query), { query: query.query, tag: query.tag }),
});

export const createWorkflow: OperationHandler<'createWorkflow'> = async ({ body, auth, deps }) => {
  const workflowId = body.workflowId ?? slugify(body.name);
  if (!workflowId) {
    throw unprocessable('name has no letters a to z or digits (accents aside) to make a workflowId of; give one in workflowId', [
      { field: 'body/workflowId', message: 'is required when name has no letters a to z or digits' },
    ]);
  }
  const steps = checkedContent(body);
  try {
    await repo.insertWorkflow(
      deps.db,
      auth.environmentId,
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
  return { status: 201, body: { data: await reply(deps.db, auth.environmentId, workflowId) } };
};

export const getWorkflow: OperationHandler<'getWorkflow'> = async ({ params, auth, deps }) => {
  const workflow = await repo.findWorkflow(deps.db, auth.environmentId, params.workflowId);
  if (!workflow) throw missing(params.workflowId);
  return { status: 200, body: { data: repo.toWire(workflow) } };
};

export const updateWorkflow: OperationHandler<'updateWorkflow'> = async ({ params, body, auth, deps }) => {
  const current = await repo.findWorkflow(deps.db, auth.environmentId, params.workflowId);
  if (!current) throw missing(params.workflowId);
  const steps = body.steps === undefined ? undefined : checkedContent(body);
  if (body.steps === undefined && body.payloadSchema) rejectIfAny(payloadSchemaProblems(body.payloadSchema));
  const values: Partial<repo.WorkflowValues> = {
    name: body.name,
    tags: body.tags,
    critical: body.critical,
    steps,
    preferenceSettings: body.preferenceSettings && { ...current.preferenceSettings, ...body.preferenceSettings } as repo.ChannelPreferences,
  };
  if (body.description !== undefined) values.description = body.description;
  if (body.payloadSchema !== undefined) values.payloadSchema = body.payloadSchema ?? undefined;
  await repo.updateWorkflow(deps.db, auth.environmentId, params.workflowId, values, deps.clock.now());
  return { status: 200, body: { data: await reply(deps.db, auth.environmentId, params.workflowId) } };
};

export const updateWorkflowStatus: OperationHandler<'updateWorkflowStatus'> = async ({ params, body, auth, deps }) => {
  if (!(await repo.updateWorkflow(deps.db, auth.environmentId, params.workflowId, { active: body.active }, deps.clock.now()))) {
    throw missing(params.workflowId);
  }
  return { status: 200, body: { data: await reply(deps.db, auth.environmentId, params.workflowId) } };
};

export const deleteWorkflow: OperationHandler<'deleteWorkflow'> = async ({ params, auth, deps }) => {
  if (!(await repo.deleteWorkflow(deps.db, auth.environmentId, params.workflowId))) throw missing(params.workflowId);
  return { status: 200, body: { data: { acknowledged: true, status: 'deleted' } } };
};
