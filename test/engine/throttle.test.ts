// The throttle step: at most `threshold` notifications per subscriber (and key value) through the
// step in a window that opens with the first; over it, the remaining steps are skipped with the
// reason, and the notification completes.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createSubscriber } from '../helpers/factories.js';
import { JobRunner } from '../../src/engine/runner.js';

let t: TestApp;
let worker: JobRunner;
beforeAll(async () => {
  t = await startTestApp();
  worker = new JobRunner(t.deps, { random: () => 0.5 });
});
beforeEach(async () => {
  await t.renew();
  await createSubscriber(t.a, { subscriberId: 'ada' });
  await createSubscriber(t.a, { subscriberId: 'bob' });
});
afterEach(async () => t.assertContract());
afterAll(async () => t?.close());

const HOUR = 3_600_000;

async function workflow(throttle: object, name = 'Login alert'): Promise<string> {
  const steps = [{ type: 'throttle', ...throttle }, { type: 'in_app', template: { content: 'sign-in {{payload.n}}' } }, { type: 'in_app', template: { content: 'again {{payload.n}}' } }];
  return (await t.a.post('/v1/workflows', { name, steps }).expect(201)).body.data.workflowId;
}

/** Triggers, runs every due job, and answers the notification. */
async function send(workflowId: string, to: string, payload: object) {
  const transactionId = (await t.a.post('/v1/events/trigger', { name: workflowId, to, payload }).expect(201)).body.data.transactionId;
  await worker.runUntilIdle();
  const list = await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200);
  return (await t.a.get(`/v1/notifications/${list.body.data[0].notificationId}`).expect(200)).body.data;
}

const feed = async (subscriberId: string) =>
  (await t.a.get(`/v1/subscribers/${subscriberId}/messages?limit=100`).expect(200)).body.data.map((m: { content: string }) => m.content).sort();

describe('a throttle step', () => {
  it('lets the threshold through in the window and skips the rest of the others, saying why', async () => {
    const id = await workflow({ amount: 1, unit: 'hours', threshold: 2 });
    const first = await send(id, 'ada', { n: 1 });
    expect(first.status).toBe('completed');
    expect(first.jobs[0]).toMatchObject({ type: 'throttle', status: 'completed', executionDetails: [{ status: 'success', detail: expect.stringMatching(/^Let through: 1 of 2 in the window ending /) }] });
    await send(id, 'ada', { n: 2 });
    const third = await send(id, 'ada', { n: 3 });
    expect(third.status).toBe('completed');
    expect(third.jobs).toMatchObject([
      { type: 'throttle', status: 'completed', executionDetails: [{ status: 'warning', detail: expect.stringMatching(/^Throttled: 3 of 2 in the window ending /) }] },
      { type: 'in_app', status: 'skipped', executionDetails: [{ status: 'warning', detail: expect.stringMatching(/^Throttled: 3 of 2/) }] },
      { type: 'in_app', status: 'skipped', executionDetails: [{ status: 'warning', detail: expect.stringMatching(/^Throttled: 3 of 2/) }] },
    ]);
    expect(await feed('ada')).toEqual(['again 1', 'again 2', 'sign-in 1', 'sign-in 2']);

    // Another subscriber has a window of their own.
    await send(id, 'bob', { n: 4 });
    expect(await feed('bob')).toEqual(['again 4', 'sign-in 4']);

    // The window opened with the first notification and is over an hour later: a new one opens.
    t.clock.advance(HOUR);
    const fourth = await send(id, 'ada', { n: 5 });
    expect(fourth.jobs[0].executionDetails[0].detail).toMatch(/^Let through: 1 of 2/);
    expect(await feed('ada')).toContain('sign-in 5');
  });

  it('counts one notification a window by default, and each throttleKey value apart', async () => {
    const id = await workflow({ amount: 10, unit: 'minutes', throttleKey: 'device' });
    await send(id, 'ada', { n: 1, device: 'phone' });
    await send(id, 'ada', { n: 2, device: 'laptop' });
    const again = await send(id, 'ada', { n: 3, device: 'phone' });
    expect(again.jobs[0].executionDetails[0].detail).toMatch(/^Throttled: 2 of 1/);
    expect(await feed('ada')).toEqual(['again 1', 'again 2', 'sign-in 1', 'sign-in 2']);
  });

  it('takes its window from the payload: a time it ends, or a length; without a valid one it lets the notification through', async () => {
    const id = await workflow({ windowPath: 'window' });
    const ends = new Date(t.clock.now().getTime() + HOUR).toISOString();
    expect((await send(id, 'ada', { n: 1, window: ends })).jobs[0].executionDetails[0].detail).toBe(`Let through: 1 of 1 in the window ending ${ends}`);
    expect((await send(id, 'ada', { n: 2, window: ends })).jobs[0].executionDetails[0].detail).toMatch(/^Throttled: 2 of 1/);

    const length = await send(id, 'bob', { n: 3, window: { amount: 2, unit: 'hours' } });
    expect(length.jobs[0].executionDetails[0].detail).toBe(`Let through: 1 of 1 in the window ending ${new Date(t.clock.now().getTime() + 2 * HOUR).toISOString()}`);

    const invalid = await send(id, 'ada', { n: 4, window: 'soon' });
    expect(invalid.jobs[0].executionDetails[0]).toMatchObject({ status: 'success', detail: 'Not throttled: payload.window is neither an ISO 8601 time nor {"amount", "unit"}' });
    expect(await feed('ada')).toContain('sign-in 4');
    // A day the calendar lacks is no time, not the day JavaScript would move it to (March 2nd).
    const noSuchDay = await send(id, 'ada', { n: 5, window: '2099-02-30T00:00:00Z' });
    expect(noSuchDay.jobs[0].executionDetails[0].detail).toBe('Not throttled: payload.window is neither an ISO 8601 time nor {"amount", "unit"}');
  });

  it('counts nothing when its conditions do not hold: it is skipped and the notification goes on', async () => {
    const id = await workflow({ amount: 1, unit: 'hours', conditions: [{ field: 'payload.throttle', operator: 'eq', value: true }] });
    for (const n of [1, 2]) {
      const notification = await send(id, 'ada', { n, throttle: false });
      expect(notification.jobs[0]).toMatchObject({ type: 'throttle', status: 'skipped', executionDetails: [{ detail: 'Step condition not met: payload.throttle eq true' }] });
    }
    expect((await send(id, 'ada', { n: 3, throttle: true })).jobs[0].executionDetails[0].detail).toMatch(/^Let through: 1 of 1/);
    expect(await feed('ada')).toHaveLength(6);
  });

  it('is refused without a window, or with a threshold below 1', async () => {
    for (const throttle of [{}, { amount: 1 }, { amount: 1, unit: 'hours', threshold: 0 }, { windowPath: 'a..b' }]) {
      const res = await t.a.post('/v1/workflows', { name: 'Bad throttle', steps: [{ type: 'throttle', ...throttle }, { type: 'in_app', template: { content: 'x' } }] }).expect(400);
      expect(res.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    }
  });
});
