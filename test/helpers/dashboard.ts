// The dashboard as a visitor meets it over HTTP: cookies kept, the CSRF token read off each page.
import supertest from 'supertest';
import { hashPassword } from '../../src/accounts/passwords.js';
import { saveOwner } from '../../src/db/repos/owners.js';
import type { TestApp } from './app.js';

export const OWNER_PASSWORD = 'correct horse battery';

/** An owner of the organization of `environmentId`, who signs in with OWNER_PASSWORD. */
export async function createOwner(t: Pick<TestApp, 'db' | 'clock'>, environmentId: string, email: string): Promise<{ organizationId: string }> {
  const { organization_id: organizationId } = await t.db('environments').where({ id: environmentId }).first('organization_id');
  await saveOwner(t.db, { organizationId, email, passwordHash: await hashPassword(OWNER_PASSWORD), now: t.clock.now() });
  return { organizationId };
}

/** A browser-like visitor: keeps cookies, reads the CSRF token out of the last page. */
export class Visitor {
  readonly agent: ReturnType<typeof supertest.agent>;
  csrf = '';
  constructor(app: Parameters<typeof supertest.agent>[0]) {
    this.agent = supertest.agent(app);
  }
  private remember(res: supertest.Response): supertest.Response {
    const token = /name="_csrf" value="([^"]+)"/.exec(res.text ?? '')?.[1];
    if (token) this.csrf = token;
    return res;
  }
  async get(url: string) {
    return this.remember(await this.agent.get(url));
  }
  async post(url: string, form: Record<string, string>) {
    return this.remember(await this.agent.post(url).type('form').send(form));
  }
  async signIn(email: string, password = OWNER_PASSWORD) {
    await this.get('/dashboard/sign-in');
    return this.post('/dashboard/sign-in', { _csrf: this.csrf, email, password });
  }
}
