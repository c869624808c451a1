import { notImplemented } from '../http/errors.js';
import type { OperationHandler, OperationId } from '../http/types.js';

/**
 * An operation the contract describes but this server does not perform yet: an honest 501 with
 * the error body, never a pretend success.
 */
export function notYet<K extends OperationId>(operationId: K): OperationHandler<K> {
  return async () => {
    throw notImplemented(`${operationId} is not available on this server yet`);
  };
}
