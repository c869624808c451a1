import { beforeAll, describe, expect, it } from 'vitest';
import type { Metrics } from '../../src/metrics.js';
import { startTestApp, useTestApp } from '../helpers/app.js';
import { JobRunner } from '../../src/engine/runner.js';
import { JOB_GAUGES_TTL_MS } from '../../src/engine/metrics.js';

const t = useTestApp();
const TOKEN = 'metrics-token-for-tests';
beforeAll(() => {
  t.deps.config.metricsToken = TOKEN;
});
const metrics = (app: { http: { get(path: string): ReturnType<typeof t.http.get> } } = t) => app.http.get('/metrics').set('Authorization', `Bearer ${TOKEN}`);

/** One sample's value from Prometheus's text format, 0 when the series is absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && wanted.every((pair) => l.slice(0, l.indexOf('}')).includes(pair)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const scrape = async () => (await metrics().expect(200)).text;

describe('GET /metrics', () => {
  it('answers in Prometheus text format to its token, without an API key', async () => {
    const res = await metrics().expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.text).toContain('# TYPE herald_http_requests_total counter');
    expect(res.text).toContain('# TYPE herald_http_request_duration_seconds histogram');
    expect(res.text).toContain('herald_process_cpu_seconds_total');
  });

  it('counts requests by operationId and status, never by raw path', async () => {
    const before = await scrape();
    await t.a.get('/v1/subscribers').expect(200);
    await t.a.get('/v1/subscribers/nobody-1').expect(404);
    await t.a.get('/v1/subscribers/nobody-2').expect(404);
    await t.http.get('/v1/subscribers').expect(401);
    const after = await scrape();
    const delta = (labels: Record<string, string>) =>
      sample(after, 'herald_http_requests_total', labels) - sample(before, 'herald_http_requests_total', labels);
    expect(delta({ operation: 'listSubscribers', status: '200' })).toBe(1);
    expect(delta({ operation: 'getSubscriber', status: '404' })).toBe(2);
    expect(delta({ operation: 'listSubscribers', status: '401' })).toBe(1);
    expect(after).not.toContain('nobody-1');
    const durations = (text: string) => sample(text, 'herald_http_request_duration_seconds_count', { operation: 'getSubscriber', status: '404' });
    expect(durations(after) - durations(before)).toBe(2);
  });

  it('counts unknown routes and wrong methods as notFound, and its own routes by name', async () => {
    const before = await scrape();
    await t.a.get('/v1/no-such-thing/abc').expect(404);
    await t.http.get('/wp-admin/setup.php').expect(404);
    await t.a.patch('/v1/subscribers').expect(405);
    await t.http.get('/health').expect(200);
    await t.http.get('/HEALTH').expect(404); // paths match letter for letter
    const after = await scrape();
    const delta = (labels: Record<string, string>) =>
      sample(after, 'herald_http_requests_total', labels) - sample(before, 'herald_http_requests_total', labels);
    expect(delta({ operation: 'notFound', status: '404' })).toBe(3);
    expect(delta({ operation: 'notFound', status: '405' })).toBe(1);
    expect(delta({ operation: 'health', status: '200' })).toBe(1);
    expect(after).not.toContain('wp-admin');
  });
});

/** The gauges of the test's app. */
const registerGauge: Metrics['registerGauge'] = (...args) => (t.app.locals.metrics as Metrics).registerGauge(...args);

describe('registerGauge', () => {
  it('reads a gauge at scrape time, with labels, dropping label values that are gone', async () => {
    let jobs = [
      { labels: { status: 'pending' }, value: 3 },
      { labels: { status: 'failed' }, value: 1 },
    ];
    registerGauge('herald_test_jobs', 'Jobs by status (test).', async () => jobs, ['status']);
    registerGauge('herald_test_queue_depth', 'Jobs waiting (test).', async () => 7);
    let text = await scrape();
    expect(sample(text, 'herald_test_jobs', { status: 'pending' })).toBe(3);
    expect(text).toMatch(/^herald_test_queue_depth 7$/m);

    jobs = [{ labels: { status: 'completed' }, value: 4 }];
    text = await scrape();
    expect(sample(text, 'herald_test_jobs', { status: 'completed' })).toBe(4);
    expect(text).not.toContain('herald_test_jobs{status="pending"}');
  });

  it('replaces a gauge registered again under the same name', async () => {
    registerGauge('herald_test_replaced', 'First.', async () => 1);
    registerGauge('herald_test_replaced', 'Second.', async () => 2);
    expect(await scrape()).toMatch(/^herald_test_replaced 2$/m);
  });
});

describe('the engine on /metrics', () => {
  it('shows jobs by status and the queue depth, from the database', async () => {
    const t = await startTestApp();
    t.deps.config.metricsToken = TOKEN;
    try {
      await t.a.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
      await t.a.post('/v1/workflows', { name: 'Ping', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
      await t.a.post('/v1/events/trigger/bulk', { events: [1, 2, 3].map(() => ({ name: 'ping', to: 'ada' })) }).expect(201);
      const before = (await metrics(t).expect(200)).text;
      expect(before).toMatch(/^herald_jobs\{status="pending"\} 3$/m);
      expect(before).toMatch(/^herald_jobs\{status="running"\} 0$/m);
      expect(before).toMatch(/^herald_queue_depth 3$/m);
      await new JobRunner(t.deps).runUntilIdle();
      // Read again once the counts' time to live has passed; within it, a scrape is served the last reading.
      expect((await metrics(t).expect(200)).text).toMatch(/^herald_queue_depth 3$/m);
      t.clock.advance(JOB_GAUGES_TTL_MS);
      const after = (await metrics(t).expect(200)).text;
      expect(after).toMatch(/^herald_jobs\{status="pending"\} 0$/m);
      expect(after).not.toMatch(/^herald_jobs\{status="completed"\}/m);
      expect(after).toMatch(/^herald_queue_depth 0$/m);
      await t.assertContract();
    } finally {
      await t.close();
    }
  });

  it("keeps each app's counts and gauges its own when one process serves several", async () => {
    const other = await startTestApp();
    other.deps.config.metricsToken = TOKEN;
    try {
      await other.a.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
      await other.a.post('/v1/workflows', { name: 'Ping', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
      await other.a.post('/v1/events/trigger', { name: 'ping', to: 'ada' }).expect(201);
      const labels = { operation: 'triggerEvent', status: '201' };
      expect(sample((await metrics(other).expect(200)).text, 'herald_http_requests_total', labels)).toBe(1);
      expect((await metrics(other).expect(200)).text).toMatch(/^herald_queue_depth 1$/m);
      // This file's app counted none of those, and its gauges read its own database.
      const mine = await scrape();
      expect(sample(mine, 'herald_http_requests_total', labels)).toBe(0);
      expect(mine).toMatch(/^herald_queue_depth 0$/m);
      expect(mine).toContain('herald_process_cpu_seconds_total');
    } finally {
      await other.close();
    }
  });
});

describe('/metrics behind its token', () => {
  it('answers 401 with the error body without the token or with another one', async () => {
    for (const authorization of [undefined, 'Bearer wrong', `Basic ${TOKEN}`, TOKEN, `Bearer ${t.a.key}`]) {
      const req = t.http.get('/metrics');
      if (authorization) req.set('Authorization', authorization);
      const res = await req.expect(401);
      expect(res.body).toMatchObject({ statusCode: 401, error: 'Unauthorized', path: '/metrics' });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(res.text).not.toContain('herald_');
    }
  });

  it('is not served (404 with the error body) when no token is configured', async () => {
    t.deps.config.metricsToken = undefined;
    try {
      const res = await t.http.get('/metrics').set('Authorization', `Bearer ${TOKEN}`).expect(404);
      expect(res.body).toMatchObject({ statusCode: 404, error: 'Not Found', path: '/metrics' });
    } finally {
      t.deps.config.metricsToken = TOKEN;
    }
  });
});
