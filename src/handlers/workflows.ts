import { notYet } from './not-yet.js';

export const listWorkflows = notYet('listWorkflows');
export const createWorkflow = notYet('createWorkflow');
export const getWorkflow = notYet('getWorkflow');
export const updateWorkflow = notYet('updateWorkflow');
export const deleteWorkflow = notYet('deleteWorkflow');
export const updateWorkflowStatus = notYet('updateWorkflowStatus');
