import type { OperationHandler } from '../http/types.js';
import { ApiError } from '../errors.js';

// The contract's inbox operations, ahead of their engine: each answers 501 until it lands.
const pending = (): never => {
  throw new ApiError(501, 'Not implemented yet');
};

export const createInboxToken: OperationHandler<'createInboxToken'> = async () => pending();
export const listInboxMessages: OperationHandler<'listInboxMessages'> = async () => pending();
export const updateInboxMessage: OperationHandler<'updateInboxMessage'> = async () => pending();
export const deleteInboxMessage: OperationHandler<'deleteInboxMessage'> = async () => pending();
export const updateInboxMessageAction: OperationHandler<'updateInboxMessageAction'> = async () => pending();
export const updateInboxMessages: OperationHandler<'updateInboxMessages'> = async () => pending();
export const getInboxCounts: OperationHandler<'getInboxCounts'> = async () => pending();
export const getInboxPreferences: OperationHandler<'getInboxPreferences'> = async () => pending();
export const updateInboxPreferences: OperationHandler<'updateInboxPreferences'> = async () => pending();
export const streamInboxEvents: OperationHandler<'streamInboxEvents'> = async () => pending();
export const createInboxEventTicket: OperationHandler<'createInboxEventTicket'> = async () => pending();
export const getInboxSettings: OperationHandler<'getInboxSettings'> = async () => pending();
export const updateInboxSettings: OperationHandler<'updateInboxSettings'> = async () => pending();
