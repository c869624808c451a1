import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from '../logger.js';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Something else to do with every finished response, given its path (no query) and the seconds it took (the HTTP metrics). */
export type FinishedResponse = (req: Request, res: Response, path: string, seconds: number) => void;

/**
 * Gives every request an id (the caller's X-Request-Id when it is a sane one), echoes it, and logs
 * one JSON line per response with it. Each of `alsoOnFinish` runs from the same listener, on the
 * same timing: one listener and one clock reading a response, however many things observe it.
 */
export function requestLog(logger: Logger, ...alsoOnFinish: FinishedResponse[]): RequestHandler {
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const path = req.originalUrl.split('?')[0];
      // The line's fields are only built when it is written.
      if (logger.isLevelEnabled('info')) logger.info({ requestId, method: req.method, path, status: res.statusCode, ms }, 'request');
      for (const observe of alsoOnFinish) observe(req, res, path, ms / 1000);
    });
    next();
  };
}
