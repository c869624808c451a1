// herald/client in-process: the key it sends and the base URL it builds, against a listening app.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiBaseUrl, createHeraldClient } from '../../src/client/index.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { listen } from '../helpers/browser.js';

let t: TestApp;
let server: Awaited<ReturnType<typeof listen>>;
beforeAll(async () => {
  t = await startTestApp();
  server = await listen(t.app);
});
// Each test starts from organizations of its own: none sees what another made.
beforeEach(async () => {
  await t.renew();
});
afterEach(async () => t.assertContract());
afterAll(async () => {
  await server?.close();
  await t?.close();
});

describe('herald/client', () => {
  it('sends the key as a Bearer token, so another environment sees nothing and a bad key gets the 401 body', async () => {
    const other = createHeraldClient({ baseUrl: server.url, apiKey: t.b.key });
    const listed = await other.GET('/subscribers');
    expect(listed.data).toMatchObject({ totalCount: 0, data: [] });

    const wrong = createHeraldClient({ baseUrl: `${server.url}/v1/`, apiKey: 'hk_not-a-key' });
    const { error, response } = await wrong.GET('/subscribers/{subscriberId}', { params: { path: { subscriberId: 'ada' } } });
    expect(response.status).toBe(401);
    expect(error).toMatchObject({ statusCode: 401, error: 'Unauthorized', message: 'Invalid API key' });
  });

  it('adds /v1 to a server URL exactly once', () => {
    expect(apiBaseUrl('http://localhost:3000')).toBe('http://localhost:3000/v1');
    expect(apiBaseUrl('http://localhost:3000/')).toBe('http://localhost:3000/v1');
    expect(apiBaseUrl('https://herald.example.com/v1/')).toBe('https://herald.example.com/v1');
  });
});
