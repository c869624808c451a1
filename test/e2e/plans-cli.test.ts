// `npm run plans`, the command line that sets an organization's plan and limits: run as a process on
// the test database, with the server (in-process here) applying its change once it reads the key again.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Client, spend, startTestApp, type TestApp } from '../helpers/app.js';
import { processDatabaseUrl } from '../helpers/db.js';
import { createTenant } from '../helpers/factories.js';
import { runScript } from '../helpers/process.js';
import { loadConfig } from '../../src/config.js';

let t: TestApp;
let keys: { free: Client; enterprise: Client };
let enterpriseOrganizationId: string;

/** Long enough for any bucket of these tests to be full again. */
const refillAll = () => t.clock.advance(10 * 60_000);

beforeAll(async () => {
  t = await startTestApp();
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

describe('npm run plans', () => {
  let env: Record<string, string>;
  beforeAll(() => {
    env = { DATABASE_URL: processDatabaseUrl(t.testDb), LOG_LEVEL: 'silent' };
  });
  // Each test has organizations of its own: what one test's script changed, the next never sees.
  beforeEach(async () => {
    const free = await createTenant(t, { name: 'free org', plan: 'free' });
    await createTenant(t, { name: 'pro org', plan: 'pro' });
    const enterprise = await createTenant(t, { name: 'enterprise org', plan: 'enterprise' });
    keys = { free: free.clients.development, enterprise: enterprise.clients.development };
    enterpriseOrganizationId = enterprise.organizationId;
  });

  it('lists organizations with their limits', async () => {
    const res = await runScript('scripts/plans.ts', ['list'], env);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/ free org {2}free {2}100\/min, burst 20\n/);
    expect(res.stdout).toMatch(/ pro org {2}pro {2}1000\/min, burst 100\n/);
    expect(res.stdout).toContain(`${enterpriseOrganizationId}  enterprise org  enterprise  no limit\n`);
  });

  // The script is another process: a running server applies its change once the key's owner,
  // remembered for HERALD_KEY_CACHE_MS, is read again.
  const keyCacheExpires = () => t.clock.advance(loadConfig({}).keyCacheMs);

  it('sets enterprise numbers that the server applies once it reads the key again', async () => {
    await keys.enterprise.get('/v1/subscribers').expect(200);
    const res = await runScript('scripts/plans.ts', ['set', enterpriseOrganizationId, '--plan', 'enterprise', '--rate', '30', '--burst', '3'], env);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('is on plan enterprise: 30/min, burst 3 per environment');
    expect((await runScript('scripts/plans.ts', ['list'], env)).stdout).toContain(`${enterpriseOrganizationId}  enterprise org  enterprise  30/min, burst 3\n`);
    expect((await keys.enterprise.get('/v1/subscribers').expect(200)).headers).not.toHaveProperty('ratelimit');

    refillAll(); // ten minutes on: the key is read again too
    const first = await keys.enterprise.get('/v1/subscribers').expect(200);
    expect(first.headers.ratelimit).toBe('"enterprise"; r=2; t=2');
    expect(first.headers['ratelimit-policy']).toMatch(/^"enterprise"; q=3; w=6; pk=:/);
    expect(await spend(keys.enterprise, 3)).toEqual([200, 200, 429]);
    const refused = await keys.enterprise.get('/v1/subscribers').expect(429);
    expect(refused.headers['retry-after']).toBe('2');
    expect(refused.body.message).toBe('Rate limit exceeded; retry in 2 seconds');
    t.clock.advance(2000);
    await keys.enterprise.get('/v1/subscribers').expect(200);
  });

  it('moves an organization to another plan, clearing its numbers; enterprise without numbers is unlimited again', async () => {
    expect((await runScript('scripts/plans.ts', ['set', enterpriseOrganizationId, '--plan', 'pro'], env)).code).toBe(0);
    refillAll(); // ten minutes on: the key is read again too
    const res = await keys.enterprise.get('/v1/subscribers').expect(200);
    expect(res.headers['ratelimit-policy']).toMatch(/^"pro"; q=100; w=6;/);
    expect((await runScript('scripts/plans.ts', ['set', enterpriseOrganizationId, '--plan', 'enterprise'], env)).code).toBe(0);
    const row = await t.db('organizations').where({ id: enterpriseOrganizationId }).first();
    expect(row).toMatchObject({ plan: 'enterprise', rate_per_minute: null, burst: null });
    keyCacheExpires();
    expect((await keys.enterprise.get('/v1/subscribers').expect(200)).headers).not.toHaveProperty('ratelimit');
  });

  it("sets an environment's retention, back to the server's with default, and lists each", async () => {
    const { environmentIds } = await createTenant(t, { name: 'retention org', plan: 'pro' });
    const environmentId = environmentIds.development;
    const set = await runScript('scripts/plans.ts', ['retention', environmentId, '90'], env);
    expect(set).toMatchObject({ code: 0, stdout: `Environment ${environmentId} keeps its notifications 90 days\n` });
    expect(await t.db('environments').where({ id: environmentId }).first('retention_days')).toEqual({ retention_days: 90 });
    expect((await runScript('scripts/plans.ts', ['retention'], env)).stdout).toContain(`${environmentId}  `);
    expect((await runScript('scripts/plans.ts', ['retention'], env)).stdout).toMatch(new RegExp(`${environmentId} {2}\\w+ {2}development {2}90 days\n`));
    expect((await runScript('scripts/plans.ts', ['retention', environmentId, '0'], env)).stdout).toContain('keeps its notifications for ever');
    const back = await runScript('scripts/plans.ts', ['retention', environmentId, 'default'], env);
    expect(back.stdout).toContain("the server's HERALD_RETENTION_DAYS (30 days where it is unset)");
    // The command sees its own shell, not the server's: it says so.
    const shell = await runScript('scripts/plans.ts', ['retention'], { ...env, HERALD_RETENTION_DAYS: '7' });
    expect(shell.stdout).toMatch(new RegExp(`${environmentId} {2}\\w+ {2}development {2}the server's HERALD_RETENTION_DAYS \\(7 days if set as in this shell\\)\n`));
    expect(await t.db('environments').where({ id: environmentId }).first('retention_days')).toEqual({ retention_days: null });
    for (const [args, message] of [
      [['retention', environmentId, 'week'], 'days must be a whole number'],
      [['retention', 'nope', '7'], 'No environment nope'],
    ] as const) {
      const res = await runScript('scripts/plans.ts', [...args], env);
      expect(res.code).toBe(1);
      expect(res.stderr).toContain(message);
    }
  }, 60_000);

  it('refuses bad input before touching anything', async () => {
    const cases: Array<[string[], number, string]> = [
      [['set', enterpriseOrganizationId, '--plan', 'platinum'], 1, '--plan must be one of free, pro, enterprise'],
      [['set', enterpriseOrganizationId, '--plan', 'free', '--rate', '10', '--burst', '2'], 1, 'for enterprise only'],
      [['set', enterpriseOrganizationId, '--plan', 'enterprise', '--rate', '10'], 1, '--rate and --burst go together'],
      [['set', enterpriseOrganizationId, '--plan', 'enterprise', '--rate', '10', '--burst', '1.5'], 1, '--burst must be a whole number'],
      [['set', 'nope', '--plan', 'pro'], 1, 'No organization nope'],
      [['set', enterpriseOrganizationId], 2, 'usage: npm run plans'],
    ];
    const results = await Promise.all(cases.map(([args]) => runScript('scripts/plans.ts', args, env)));
    cases.forEach(([args, code, message], i) => {
      expect(results[i].code, args.join(' ')).toBe(code);
      expect(results[i].stderr, args.join(' ')).toContain(message);
    });
    const row = await t.db('organizations').where({ id: enterpriseOrganizationId }).first();
    expect(row).toMatchObject({ plan: 'enterprise', rate_per_minute: null, burst: null });
  }, 60_000);
});
