import { beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
  await t.a.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
  t.clock.advance(1000);
  await t.a
    .post('/v1/workflows', {
      name: 'Comment added',
      steps: [
        { type: 'in_app', template: { content: 'x' } },
        { type: 'email', template: { subject: 's', content: 'c' } },
        { type: 'sms', active: false, template: { content: 'off' } },
      ],
      payloadSchema: { type: 'object', properties: { postTitle: { type: 'string' }, count: { type: 'integer' }, any: {} } },
      preferenceSettings: { email: false },
    })
    .expect(201);
  t.clock.advance(1000);
  await t.a.post('/v1/workflows', { name: 'Security alert', critical: true, steps: [{ type: 'sms', template: { content: 'x' } }] }).expect(201);
  t.clock.advance(1000);
  await t.a.post('/v1/workflows', { name: 'Dormant', active: false, steps: [{ type: 'push', template: { title: 't', content: 'c' } }] }).expect(201);
});
beforeEach(() => t.clock.advance(1000));

const entries = async () => (await t.a.get('/v1/subscribers/ada/preferences').expect(200)).body.data;

describe('GET /subscribers/{subscriberId}/preferences (getSubscriberPreferences)', () => {
  it("lists one entry per active workflow in Novu's shape, with the channels its active steps use", async () => {
    const data = await entries();
    expect(data).toEqual([
      {
        template: {
          _id: 'comment-added',
          workflowId: 'comment-added',
          name: 'Comment added',
          critical: false,
          triggers: [
            {
              type: 'event',
              identifier: 'comment-added',
              variables: [{ name: 'postTitle', type: 'String' }, { name: 'count', type: 'Number' }, { name: 'any' }],
            },
          ],
        },
        preference: { enabled: true, channels: { in_app: true, email: false } },
      },
      {
        template: expect.objectContaining({ workflowId: 'security-alert', critical: true }),
        preference: { enabled: true, channels: { sms: true } },
      },
    ]);
  });

  it('answers 404 for an unknown subscriber, and for one of another environment', async () => {
    await t.a.get('/v1/subscribers/nobody/preferences').expect(404);
    await t.b.get('/v1/subscribers/ada/preferences').expect(404);
  });
});

describe('GET /subscribers/{subscriberId}/preferences/global (getSubscriberGlobalPreferences)', () => {
  it('shows everything enabled for a subscriber who never chose', async () => {
    const res = await t.a.get('/v1/subscribers/ada/preferences/global').expect(200);
    expect(res.body).toEqual({
      data: { preference: { enabled: true, channels: { in_app: true, email: true, sms: true, chat: true, push: true } } },
    });
  });

  it('answers 404 for an unknown subscriber', async () => {
    await t.a.get('/v1/subscribers/nobody/preferences/global').expect(404);
  });
});

describe('PATCH /subscribers/{subscriberId}/preferences (updateSubscriberPreferences)', () => {
  it('turns a channel off in the global layer, which every workflow then shows', async () => {
    const res = await t.a.patch('/v1/subscribers/ada/preferences', { channels: { in_app: false } }).expect(200);
    expect(res.body.data).toEqual({
      preference: { enabled: true, channels: { in_app: false, email: true, sms: true, chat: true, push: true } },
    });
    expect((await entries())[0].preference.channels).toEqual({ in_app: false, email: false });
  });

  it("accepts Novu's list form and merges it with what was chosen before", async () => {
    const res = await t.a
      .patch('/v1/subscribers/ada/preferences', { preferences: [{ type: 'sms', enabled: false }, { type: 'in_app', enabled: true }] })
      .expect(200);
    expect(res.body.data.preference.channels).toEqual({ in_app: true, email: true, sms: false, chat: true, push: true });
  });

  it("lets the subscriber's choice for a workflow override the workflow's default", async () => {
    const res = await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', channels: { email: true } }).expect(200);
    expect(res.body.data.template.workflowId).toBe('comment-added');
    expect(res.body.data.preference).toEqual({ enabled: true, channels: { in_app: true, email: true } });
  });

  it("takes each setting from the most specific layer that chose it: the workflow choice, the global layer, the workflow's default", async () => {
    // comment-added: email off by default, turned on by ada for this workflow.
    await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', channels: { email: true } }).expect(200);
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { email: false } }).expect(200);
    expect((await entries())[0].preference.channels.email).toBe(true);
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { in_app: false } }).expect(200);
    expect((await entries())[0].preference.channels).toEqual({ in_app: false, email: true });

    const res = await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', channels: { in_app: true } }).expect(200);
    expect(res.body.data.preference).toEqual({ enabled: true, channels: { in_app: true, email: true } });

    // A workflow ada chose nothing for: the global layer over its default.
    await t.a
      .post('/v1/workflows', { name: 'Weekly mail', preferenceSettings: { email: false }, steps: [{ type: 'email', template: { subject: 's', content: 'c' } }] })
      .expect(201);
    const weekly = async () => (await entries()).find((e: { template: { workflowId: string } }) => e.template.workflowId === 'weekly-mail').preference.channels;
    expect(await weekly()).toEqual({ email: false });
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { email: true, in_app: true } }).expect(200);
    expect(await weekly()).toEqual({ email: true });
    await t.a.delete('/v1/workflows/weekly-mail').expect(200);
  });

  it("clears a layer's choice for a channel with null: the channel follows the next layer again", async () => {
    // comment-added: ada turns email on for it, over the workflow's default (off) and then a global off.
    await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', channels: { email: true } }).expect(200);
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { email: false, in_app: false } }).expect(200);
    expect((await entries())[0].preference.channels).toEqual({ in_app: false, email: true });
    // Cleared for the workflow: the global layer's off.
    const cleared = await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', channels: { email: null } }).expect(200);
    expect(cleared.body.data.preference.channels).toEqual({ in_app: false, email: false });
    // Cleared globally too: the workflow's default for email (off), everything for in-app (on).
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { email: null, in_app: null } }).expect(200);
    expect((await entries())[0].preference.channels).toEqual({ in_app: true, email: false });
    // The global layer shows what it lets through: with no choice, every channel.
    expect((await t.a.get('/v1/subscribers/ada/preferences/global').expect(200)).body.data.preference.channels).toMatchObject({ email: true, in_app: true });
  });

  it('turns a whole workflow off, leaving the others', async () => {
    const res = await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', enabled: false }).expect(200);
    expect(res.body.data.preference).toEqual({ enabled: false, channels: { in_app: false, email: false } });
    const [comment, security] = await entries();
    expect(comment.preference.enabled).toBe(false);
    expect(security.preference.enabled).toBe(true);
  });

  it('turns everything off with the global switch', async () => {
    await t.a.patch('/v1/subscribers/ada/preferences', { enabled: false }).expect(200);
    expect((await entries()).map((e: { preference: { enabled: boolean } }) => e.preference.enabled)).toEqual([false, false]);
    await t.a.patch('/v1/subscribers/ada/preferences', { enabled: true }).expect(200);
  });

  it('answers 404 for an unknown workflow and for an unknown subscriber', async () => {
    expect((await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'nope', enabled: false }).expect(404)).body.message).toBe(
      'Workflow nope not found',
    );
    await t.a.patch('/v1/subscribers/nobody/preferences', { enabled: false }).expect(404);
  });

  it('rejects a body with nothing to change, and unknown channels, with 400', async () => {
    await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added' }).expect(400);
    await t.a.patch('/v1/subscribers/ada/preferences', {}).expect(400);
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { fax: true } }).expect(400);
    await t.a.patch('/v1/subscribers/ada/preferences', { preferences: [{ type: 'fax', enabled: true }] }).expect(400);
  });

  it("cannot touch another environment's subscriber or use its workflows", async () => {
    await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', enabled: false }).expect(200);
    await t.b.patch('/v1/subscribers/ada/preferences', { enabled: false }).expect(404);
    await t.b.post('/v1/subscribers', { subscriberId: 'ada' }).expect(201);
    await t.b.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', enabled: false }).expect(404);
    expect((await entries())[0].preference.enabled).toBe(false);
  });

  it("forgets a workflow's layer when the workflow is deleted, and the subscriber's layers when it is", async () => {
    await t.a.patch('/v1/subscribers/ada/preferences', { workflowId: 'comment-added', enabled: false }).expect(200);
    await t.a.patch('/v1/subscribers/ada/preferences', { channels: { in_app: false } }).expect(200);
    // This test's ada: other tests' subscribers keep their own layers.
    const { id: adaKey } = await t.db('subscribers').where({ environment_id: t.environments.a, subscriber_id: 'ada' }).first();
    const layers = (table: string) => t.db(table).where({ subscriber_id: adaKey }).count({ n: '*' }).first();
    expect(await layers('subscriber_workflow_preferences')).toMatchObject({ n: 1 });
    await t.a.delete('/v1/workflows/comment-added').expect(200);
    expect((await entries()).map((e: { template: { workflowId: string } }) => e.template.workflowId)).toEqual(['security-alert']);
    expect(await layers('subscriber_workflow_preferences')).toMatchObject({ n: 0 });
    expect(await layers('subscriber_global_preferences')).toMatchObject({ n: 1 });
    await t.a.delete('/v1/subscribers/ada').expect(200);
    expect(await layers('subscriber_global_preferences')).toMatchObject({ n: 0 });
  });
});
