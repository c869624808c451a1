// `npm run mock` as a process: it starts from the command line and answers over HTTP.
import { describe, expect, it } from 'vitest';
import { startScript } from '../helpers/process.js';
import { documentedAnswer } from '../helpers/spec.js';

// It does not touch the database, so it runs once.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('npm run mock', () => {
  it('starts from the command line on PORT and answers over HTTP', async () => {
    const mock = await startScript('scripts/mock.ts', {
      env: { PORT: '0', HOST: '127.0.0.1' },
      ready: [/"msg":"Herald mock server is listening"/],
    });
    try {
      const port = Number(/"port":(\d+)/.exec(mock.output())?.[1]);
      const res = await fetch(`http://127.0.0.1:${port}/v1/subscribers/user-123`, { headers: { Authorization: 'Bearer hk_anything' } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(documentedAnswer('/subscribers/{subscriberId}', 'get').body);
    } finally {
      mock.child.kill('SIGTERM');
    }
    expect(await mock.exited).toBe(0);
  });
});
