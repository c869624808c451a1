import type { OperationHandler } from '../http/types.js';
import { pageRequest } from '../db/paginate.js';
import * as repo from '../db/repos/workflows.js';
import * as workflows from '../engine/workflows.js';

export const listWorkflows: OperationHandler<'listWorkflows'> = async ({ query, auth, deps, reserve }) => ({
  status: 200,
  body: await repo.listWorkflows(deps.db, auth.environmentId, pageRequest(query, reserve), { query: query.query, tag: query.tag }),
});

export const createWorkflow: OperationHandler<'createWorkflow'> = async ({ body, auth, deps }) => ({
  status: 201,
  body: { data: await workflows.createWorkflow(deps, auth.environmentId, body) },
});

export const getWorkflow: OperationHandler<'getWorkflow'> = async ({ params, auth, deps }) => ({
  status: 200,
  body: { data: await workflows.getWorkflow(deps, auth.environmentId, params.workflowId) },
});

export const updateWorkflow: OperationHandler<'updateWorkflow'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await workflows.updateWorkflow(deps, auth.environmentId, params.workflowId, body) },
});

export const updateWorkflowStatus: OperationHandler<'updateWorkflowStatus'> = async ({ params, body, auth, deps }) => ({
  status: 200,
  body: { data: await workflows.setWorkflowStatus(deps, auth.environmentId, params.workflowId, body.active) },
});

export const deleteWorkflow: OperationHandler<'deleteWorkflow'> = async ({ params, auth, deps }) => {
  await workflows.deleteWorkflow(deps, auth.environmentId, params.workflowId);
  return { status: 200, body: { data: { acknowledged: true, status: 'deleted' } } };
};
