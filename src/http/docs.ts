import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { RequestHandler } from 'express';
import type { Logger } from '../logger.js';
import { ROOT } from '../paths.js';
import { CONTRACT_PATH } from '../contract.js';
import { ApiError } from '../errors.js';
import { sendError } from './errors.js';
import { sendFileFromMemory } from './files.js';

export const DOCS_HTML_PATH = path.join(ROOT, 'dist', 'docs', 'index.html');
const DOCS_SCRIPT = path.join(ROOT, 'scripts', 'docs.ts');

/** The page exists and was built from the contract as it is now. */
function isFresh(file: string): boolean {
  try {
    return fs.statSync(file).mtimeMs >= fs.statSync(CONTRACT_PATH).mtimeMs;
  } catch {
    return false;
  }
}

/** Builds the page into `file` (a process running `scripts/docs.ts`). */
export type DocsBuild = (file: string) => Promise<void>;

const buildWithScript: DocsBuild = async (file) => {
  await promisify(execFile)(process.execPath, ['--import', 'tsx', DOCS_SCRIPT, '--out', file], { cwd: ROOT });
};

const NOT_FRAMED = { 'X-Frame-Options': 'DENY', 'Content-Security-Policy': "frame-ancestors 'none'" };

/**
 * GET /docs: the Redoc page that `npm run docs` builds. When it is missing, or older than the
 * contract, the first request builds it (a few seconds, once; concurrent requests wait for the
 * same build) and every later one is served from the file. Building lazily keeps start fast: most
 * servers never serve the page, and a build costs seconds of CPU. The build runs as its own process,
 * so the server never loads Redocly. A build that failed is remembered: every later request is a
 * 503 at once, not a build of its own (seconds of CPU each, for anyone who asks), until the page
 * appears (`npm run docs` on the server) or the server restarts.
 */
export function docsPage(logger: Logger, file: string = DOCS_HTML_PATH, buildDocs: DocsBuild = buildWithScript): RequestHandler {
  let built: Promise<void> | undefined;
  let failed = false;
  const build = async () => {
    if (isFresh(file)) return;
    const started = Date.now();
    logger.info({ file }, 'building the API reference');
    await buildDocs(file);
    logger.info({ file, ms: Date.now() - started }, 'built the API reference');
  };
  const unavailable = new ApiError(503, 'The API reference could not be built; run `npm run docs` on the server');
  return (req, res, next) => {
    if (failed) {
      if (!isFresh(file)) return sendError(req, res, unavailable);
      failed = false;
      built = undefined;
    }
    built ??= build();
    built.then(
      // Not to be framed by another site (a page that overlays it to steer clicks).
      () => sendFileFromMemory(res.set(NOT_FRAMED), file, 'html', next),
      (err: unknown) => {
        if (!failed) logger.error({ err }, 'could not build the API reference');
        failed = true;
        sendError(req, res, unavailable);
      },
    );
  };
}
