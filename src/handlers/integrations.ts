import { notYet } from './not-yet.js';

export const listIntegrations = notYet('listIntegrations');
export const createIntegration = notYet('createIntegration');
export const updateIntegration = notYet('updateIntegration');
export const deleteIntegration = notYet('deleteIntegration');
export const updateIntegrationStatus = notYet('updateIntegrationStatus');
