import { STATUS_CODES } from 'node:http';
import type { ErrorRequestHandler, Request, Response } from 'express';
import type { ErrorBody, ErrorDetail } from '../contract.js';
import { ApiError, conflict, badRequest } from '../errors.js';
import type { Logger } from '../logger.js';
import { isDatabaseError, isForeignKeyViolation, isUniqueViolation } from '../db/errors.js';

/** "Unprocessable Entity" rather than Node's "Unprocessable Content", as Novu and the docs say. */
function statusName(status: number): string {
  return status === 422 ? 'Unprocessable Entity' : (STATUS_CODES[status] ?? 'Error');
}

export function errorBody(status: number, message: string, path: string, details?: ErrorDetail[]): ErrorBody {
  return {
    statusCode: status,
    error: statusName(status),
    message,
    ...(details && details.length > 0 ? { details } : {}),
    timestamp: new Date().toISOString(),
    path,
  };
}

export function sendError(req: Request, res: Response, error: ApiError): void {
  if (error.headers) res.set(error.headers);
  res.status(error.status).json(errorBody(error.status, error.message, req.originalUrl.split('?')[0], error.details));
}

/** A size in bytes as the error messages give it: `1 MiB`, `16 KiB`. */
function sizeOf(bytes: number): string {
  if (bytes % 1_048_576 === 0) return `${bytes / 1_048_576} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/**
 * Errors from express.json (body-parser) carry a `type` that says what went wrong, except the
 * errors of the stream it reads through: a body whose Content-Encoding (gzip, deflate, br) does not
 * match its bytes fails in zlib, and arrives as a bare http-errors 400 with zlib's `code`.
 */
function fromBodyParser(err: { type?: string; status?: number; code?: unknown; limit?: unknown; body?: unknown }): ApiError | undefined {
  switch (err.type) {
    case 'entity.too.large':
      // The parser's own limit: 1 MiB for the API, 16 KiB for the dashboard's forms.
      return new ApiError(413, `The request body is larger than ${typeof err.limit === 'number' ? sizeOf(err.limit) : 'allowed'}`);
    case 'entity.too.many.values':
      return new ApiError(413, `The request body holds more than ${Number(err.limit).toLocaleString('en-US')} JSON values (objects, arrays, strings, numbers, booleans and nulls; keys not counted)`);
    case 'entity.too.many.pieces':
      return new ApiError(413, `The request body came in more than ${Number(err.limit).toLocaleString('en-US')} pieces (chunks); send it in fewer, larger ones`);
    case 'entity.too.many.keys':
      return new ApiError(413, `The request body's objects use more than ${Number(err.limit).toLocaleString('en-US')} distinct key names together`);
    case 'entity.parse.failed':
      // Only objects and arrays pass the parser's strict mode; `null` or `"ada"` are JSON all the same.
      return badRequest(isJson(err.body) ? 'The request body must be a JSON object, not a string, number, boolean or null' : 'The request body is not valid JSON');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return badRequest('The request body must be encoded as UTF-8');
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return badRequest('The request body could not be read');
    default:
      if (err.type === undefined && err.status === 400) {
        const inflating = typeof err.code === 'string' && /^(Z_|ERR_BROTLI|ERR_ZLIB)/.test(err.code);
        return badRequest(inflating ? 'The request body could not be decompressed: it does not match its Content-Encoding' : 'The request body could not be read');
      }
      return undefined;
  }
}

/** An error body-parser raised about the request itself (http-errors marks those `expose`). */
function isBodyParserError(err: unknown): err is { type?: string; status?: number; code?: unknown } {
  if (!err || typeof err !== 'object') return false;
  return 'type' in err || ((err as { expose?: unknown }).expose === true && (err as { status?: unknown }).status === 400);
}

/**
 * An unexpected error as the log gets it. Knex writes the failed statement into a database error's
 * message with its values filled in, and PostgreSQL's `detail` can quote a whole row: either can
 * hold what the request carried, credentials included. A database error is therefore logged by its
 * code, the database's own words (what follows knex's " - ") and its stack frames, never with the
 * statement's values.
 */
function loggableError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  if (!isDatabaseError(err)) return err;
  const { code, table, column, constraint, routine } = err as Error & Record<string, unknown>;
  const message = err.message.includes(' - ') ? err.message.slice(err.message.lastIndexOf(' - ') + 3) : err.message;
  // The stack begins with the name and the message (values and all); keep only the frames.
  const header = `${err.name}: ${err.message}`;
  const stack = err.stack ?? '';
  const frames = stack.startsWith(header) ? stack.slice(header.length) : stack.split('\n').filter((line) => /^\s+at /.test(line)).map((line) => `\n${line}`).join('');
  const safe = Object.assign(new Error(message), { code, table, column, constraint, routine });
  safe.name = err.constructor.name;
  safe.stack = `${safe.name}: ${message}${frames}`;
  return safe;
}

/**
 * The one place that turns anything thrown into the error body: typed errors as they are, body
 * parser failures and unique-constraint races as 4xx, and everything else as a 500 whose cause is
 * logged and never sent.
 */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    let error: ApiError | undefined;
    if (err instanceof ApiError) error = err;
    else if (isBodyParserError(err)) error = fromBodyParser(err);
    else if (isUniqueViolation(err)) error = conflict('The resource already exists');
    else if (isForeignKeyViolation(err)) error = conflict('A resource this request refers to was deleted meanwhile; retry it');
    if (!error) {
      const requestId = res.getHeader('X-Request-Id');
      logger.error({ err: loggableError(err), requestId, method: req.method, path: req.originalUrl }, 'request failed');
      error = new ApiError(500, `Something went wrong on our side; request id ${requestId}`);
    }
    sendError(req, res, error);
  };
}

function isJson(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
