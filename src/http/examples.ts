// /examples/inbox/: the example notification centre (examples/inbox/ in the repository), served
// beside the API it calls, with herald/client's browser module from the client's build
// (`npm run build:client`, part of `npm run build`). Plain files; the page asks for a subscriber
// token itself, so serving it opens nothing.
import fs from 'node:fs';
import path from 'node:path';
import express, { type RequestHandler, type Router } from 'express';
import { ROOT } from '../paths.js';
import { ApiError } from '../errors.js';
import { sendError } from './errors.js';
import { sendFileFromMemory } from './files.js';

export const INBOX_EXAMPLE_DIR = path.join(ROOT, 'examples', 'inbox');
export const CLIENT_BROWSER_MODULE = path.join(ROOT, 'dist', 'client', 'browser', 'herald-client.js');
/** What the example's files are, by extension. */
const TYPES: Record<string, string> = { '.html': 'html', '.css': 'css', '.js': 'text/javascript' };

/** Its own files and the API of its own origin, nothing else; no framing, no referrer. */
const pageHeaders: RequestHandler = (_req, res, next) => {
  res.set({
    'Content-Security-Policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
  });
  next();
};

export function inboxExample(clientModule = CLIENT_BROWSER_MODULE): Router {
  const router = express.Router({ strict: true });
  router.use(pageHeaders);
  // The page's files are relative to it: /examples/inbox must be /examples/inbox/.
  router.get('/', (req, res, next) => {
    const [pathname, query] = req.originalUrl.split(/\?(.*)/s);
    if (pathname.endsWith('/')) return next();
    res.redirect(301, `${pathname}/${query ? `?${query}` : ''}`);
  });
  router.get('/herald-client.js', (req, res, next) => {
    if (!fs.existsSync(clientModule)) return sendError(req, res, new ApiError(503, 'herald/client is not built; run `npm run build` (or `npm run build:client`) on the server'));
    sendFileFromMemory(res.set('Cache-Control', 'no-cache'), clientModule, 'text/javascript', next);
  });
  // The page's own files, as they are in the folder; anything else is the app's 404.
  const files = new Map(fs.readdirSync(INBOX_EXAMPLE_DIR).filter((name) => TYPES[path.extname(name)]).map((name) => [`/${name}`, name]));
  files.set('/', 'index.html');
  router.get(/.*/, (req, res, next) => {
    const name = files.get(req.path);
    if (!name) return next();
    sendFileFromMemory(res.set('Cache-Control', 'no-cache'), path.join(INBOX_EXAMPLE_DIR, name), TYPES[path.extname(name)], next);
  });
  return router;
}
