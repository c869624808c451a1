// The typed errors any layer may throw when a request cannot be done as asked. Only `http/errors.ts`
// turns them into the error body; the engine and the handlers throw them without knowing HTTP.
import type { ErrorDetail } from './contract.js';

/** An error meant for the caller: its status and message go out as they are. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

export const badRequest = (message: string, details?: ErrorDetail[]) => new ApiError(400, message, details);
export const unauthorized = (message: string) => new ApiError(401, message);
export const notFound = (message: string) => new ApiError(404, message);
export const conflict = (message: string) => new ApiError(409, message);
export const unprocessable = (message: string, details?: ErrorDetail[]) => new ApiError(422, message, details);
export const forbidden = (message: string) => new ApiError(403, message);
