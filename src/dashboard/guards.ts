// What every dashboard page shares: how a page is sent, who may see it, and the CSRF check that
// every state-changing form passes.
import type { Request, RequestHandler, Response } from 'express';
import { sameToken, sessionOf } from './session.js';
import { messagePage, type PageContext } from './views.js';

export const pageContext = (req: Request, res: Response): PageContext => ({ nonce: res.locals.nonce, base: req.baseUrl });

export const sendPage = (res: Response, status: number, page: string) => res.status(status).type('html').send(page);

export const requireSession: RequestHandler = (req, res, next) => {
  if (sessionOf(res)) return next();
  res.redirect(303, `${req.baseUrl}/sign-in`);
};

/** Every state-changing form must carry the session's CSRF token. */
export const requireCsrf: RequestHandler = (req, res, next) => {
  if (sameToken(req.body?._csrf, sessionOf(res)!.csrfToken)) return next();
  sendPage(
    res,
    403,
    messagePage(pageContext(req, res), 'Form refused', 'This form did not come from your dashboard, or it expired. Reload the page and try again.', {
      href: `${req.baseUrl}/settings/api-keys`,
      text: 'Back to API keys',
    }),
  );
};
