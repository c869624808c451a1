import { beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
});
// Each test happens a second after the one before, so creation order is observable.
beforeEach(() => t.clock.advance(1000));

const commentAdded = {
  name: 'Comment added',
  description: 'Tells the author about a new comment.',
  tags: ['social', 'comments'],
  steps: [
    { type: 'in_app', template: { content: '{{actor.firstName}} commented on {{payload.postTitle}}' } },
    { type: 'delay', amount: 1, unit: 'hours' },
    { type: 'email', template: { subject: 'New comment on {{payload.postTitle}}', content: '<p>{{payload.commentText}}</p>' } },
    { type: 'digest', amount: 10, unit: 'minutes', digestKey: 'postId' },
    { type: 'chat', template: { content: '{{step.total_count}} comments' }, conditions: [{ field: 'payload.priority', operator: 'in', value: ['high'] }] },
    { type: 'in_app', stepId: 'summary', active: false, template: { content: 'x' } },
  ],
  payloadSchema: { type: 'object', required: ['postTitle'], properties: { postTitle: { type: 'string' } } },
};

/** The three workflows the create tests make, in the same order, for the tests that read or change them. */
async function createTheThree(): Promise<void> {
  await t.a.post('/v1/workflows', commentAdded).expect(201);
  t.clock.advance(1000);
  await t.a.post('/v1/workflows', { workflowId: 'password-reset', name: 'Reset', critical: true, active: false, preferenceSettings: { sms: false } }).expect(201);
  t.clock.advance(1000);
  await t.a.post('/v1/workflows', { name: 'Two emails', steps: [1, 2].map((n) => ({ type: 'sms', template: { content: `#${n}` } })) }).expect(201);
  t.clock.advance(1000);
}

describe('POST /workflows (createWorkflow)', () => {
  it('creates a workflow, deriving its workflowId from the name and an id for every step', async () => {
    const res = await t.a.post('/v1/workflows', commentAdded).expect(201);
    expect(res.body.data).toMatchObject({
      workflowId: 'comment-added',
      name: 'Comment added',
      active: true,
      critical: false,
      tags: ['social', 'comments'],
      preferenceSettings: { in_app: true, email: true, sms: true, chat: true, push: true },
      payloadSchema: commentAdded.payloadSchema,
      _environmentId: t.environments.a,
    });
    expect(res.body.data.steps.map((s: { stepId: string }) => s.stepId)).toEqual(['in-app', 'delay', 'email', 'digest', 'chat', 'summary']);
    expect(res.body.data.steps.map((s: { active: boolean }) => s.active)).toEqual([true, true, true, true, true, false]);
  });

  it('keeps a chosen workflowId, the active flag and the channel defaults', async () => {
    const res = await t.a
      .post('/v1/workflows', { workflowId: 'password-reset', name: 'Reset', critical: true, active: false, preferenceSettings: { sms: false } })
      .expect(201);
    expect(res.body.data).toMatchObject({ workflowId: 'password-reset', active: false, critical: true, steps: [] });
    expect(res.body.data.preferenceSettings).toEqual({ in_app: true, email: true, sms: false, chat: true, push: true });
    expect(res.body.data).not.toHaveProperty('payloadSchema');
  });

  it('numbers the stepIds of repeated step types', async () => {
    const res = await t.a
      .post('/v1/workflows', { name: 'Two emails', steps: [1, 2].map((n) => ({ type: 'sms', template: { content: `#${n}` } })) })
      .expect(201);
    expect(res.body.data.steps.map((s: { stepId: string }) => s.stepId)).toEqual(['sms', 'sms-2']);
  });

  it('rejects a workflowId that already exists with 409', async () => {
    await t.a.post('/v1/workflows', commentAdded).expect(201);
    const res = await t.a.post('/v1/workflows', { name: 'Comment added!' }).expect(409);
    expect(res.body.message).toBe('Workflow comment-added already exists');
  });

  it('rejects a template that does not compile with 422 naming the step and the error', async () => {
    const res = await t.a
      .post('/v1/workflows', { name: 'Broken', steps: [{ type: 'email', template: { subject: 'Hi', content: '{{#if payload.x}}unclosed' } }] })
      .expect(422);
    expect(res.body.details[0].field).toBe('body/steps/0/template/content');
    expect(res.body.details[0].message).toMatch(/^does not compile: Parse error/);
    await t.a.get('/v1/workflows/broken').expect(404);
  });

  it('rejects partials and unknown helpers, which would only fail when sending', async () => {
    const res = await t.a
      .post('/v1/workflows', {
        name: 'Helpers',
        steps: [
          { type: 'sms', template: { content: '{{> footer}}' } },
          { type: 'push', template: { title: '{{shout payload.title}}', content: 'x' } },
        ],
      })
      .expect(422);
    expect(res.body.details).toEqual([
      { field: 'body/steps/0/template/content', message: 'does not compile: partials are not supported' },
      { field: 'body/steps/1/template/title', message: 'does not compile: unknown helper "shout"' },
    ]);
  });

  it('rejects built-in helpers given a number of arguments they refuse when rendering', async () => {
    const wrong = ['{{#if}}x{{/if}}', '{{#if a b}}x{{/if}}', '{{#unless}}x{{/unless}}', '{{#with a b}}x{{/with}}', '{{#each}}x{{/each}}', '{{#each a b}}x{{/each}}', '{{lookup}}', '{{lookup payload}}', '{{if}}'];
    const res = await t.a.post('/v1/workflows', { name: 'Arity', steps: wrong.map((content) => ({ type: 'sms', template: { content } })) }).expect(422);
    expect(res.body.details.map((detail: { message: string }) => detail.message)).toEqual([
      'does not compile: if takes exactly one argument',
      'does not compile: if takes exactly one argument',
      'does not compile: unless takes exactly one argument',
      'does not compile: with takes exactly one argument',
      'does not compile: each takes exactly one argument',
      'does not compile: each takes exactly one argument',
      'does not compile: lookup takes exactly two arguments (an object and a key)',
      'does not compile: lookup takes exactly two arguments (an object and a key)',
      'does not compile: if takes exactly one argument',
    ]);
    // Given what they take, they render; `{{else if}}` chains and hash arguments included.
    const right = ['{{#if payload.a}}x{{else if payload.b}}y{{/if}}', '{{#each payload.items}}{{this}}{{/each}}', '{{lookup payload "a"}}', '{{#with payload}}{{a}}{{/with}}', '{{#unless payload.a}}z{{/unless}}'];
    await t.a.post('/v1/workflows', { name: 'Arity right', steps: right.map((content) => ({ type: 'sms', template: { content } })) }).expect(201);
  });

  it('rejects an invalid payloadSchema with 422', async () => {
    const res = await t.a.post('/v1/workflows', { name: 'Bad schema', payloadSchema: { type: 'strnig' } }).expect(422);
    expect(res.body.details[0].field).toBe('body/payloadSchema');
  });

  it("rejects repeated stepIds, templates that do not compile and conditions whose value does not fit the operator with 422, each step's problems together in that order", async () => {
    const res = await t.a
      .post('/v1/workflows', {
        name: 'Conditions',
        steps: [
          { type: 'sms', stepId: 'a', template: { content: '{{> partial}}' }, conditions: [{ field: 'payload.x', operator: 'in', value: 'x' }] },
          {
            type: 'in_app',
            stepId: 'a',
            template: { content: 'y', primaryAction: { label: '{{shout payload.x}}' }, subject: '{{> subject}}' },
            conditions: [{ field: 'subscriber.email', operator: 'exists', value: 1 }, { field: 'payload.n', operator: 'gt' }],
          },
          { type: 'sms', stepId: 'b', template: { content: '{{> last}}' } },
        ],
      })
      .expect(422);
    expect(res.body.details.map((d: { field: string }) => d.field)).toEqual([
      'body/steps/0/template/content',
      'body/steps/0/conditions/0/value',
      'body/steps/1/stepId',
      'body/steps/1/template/primaryAction/label',
      'body/steps/1/template/subject',
      'body/steps/1/conditions/0/value',
      'body/steps/1/conditions/1/value',
      'body/steps/2/template/content',
    ]);
  });

  it('rejects steps that break their schema with 400 naming the field', async () => {
    const delayBoth = await t.a.post('/v1/workflows', { name: 'D', steps: [{ type: 'delay', amount: 1, unit: 'hours', delayPath: 'sendAt' }] }).expect(400);
    expect(delayBoth.body.details[0].field).toMatch(/^body\/steps\/0/);
    const noTemplate = await t.a.post('/v1/workflows', { name: 'E', steps: [{ type: 'email' }] }).expect(400);
    expect(noTemplate.body.details).toContainEqual({ field: 'body/steps/0/template', message: 'is required' });
    const unknownType = await t.a.post('/v1/workflows', { name: 'F', steps: [{ type: 'fax', template: { content: 'x' } }] }).expect(400);
    expect(unknownType.body.details[0].field).toMatch(/^body\/steps\/0/);
    await t.a.post('/v1/workflows', { name: 'G', steps: [{ type: 'digest', amount: 0, unit: 'hours' }] }).expect(400);
    await t.a.post('/v1/workflows', { name: 'H', steps: [{ type: 'sms', template: { content: 'x', subject: 'y' } }] }).expect(400);
    await t.a.post('/v1/workflows', { name: 'I', workflowId: 'Not A Slug' }).expect(400);
  });

  it('answers 422 when the name gives no workflowId and none is chosen, saying which letters make one', async () => {
    await t.a.post('/v1/workflows', { name: '!!!' }).expect(422);
    const cyrillic = await t.a.post('/v1/workflows', { name: 'Новый комментарий' }).expect(422);
    expect(cyrillic.body.message).toBe('name has no letters a to z or digits (accents aside) to make a workflowId of; give one in workflowId');
    await t.a.post('/v1/workflows', { workflowId: 'new-comment', name: 'Новый комментарий' }).expect(201);
    await t.a.delete('/v1/workflows/new-comment').expect(200);
  });
});

describe('GET /workflows/{workflowId} (getWorkflow)', () => {
  beforeEach(createTheThree);

  it('returns the workflow with its steps', async () => {
    const res = await t.a.get('/v1/workflows/comment-added').expect(200);
    expect(res.body.data.steps).toHaveLength(6);
    expect(res.body.data.steps[4].conditions).toEqual([{ field: 'payload.priority', operator: 'in', value: ['high'] }]);
  });

  it("answers 404 for an unknown workflow, and for another environment's", async () => {
    expect((await t.a.get('/v1/workflows/nope').expect(404)).body.message).toBe('Workflow nope not found');
    await t.aProduction.get('/v1/workflows/comment-added').expect(404);
    await t.b.get('/v1/workflows/comment-added').expect(404);
  });
});

describe('PUT /workflows/{workflowId} (updateWorkflow)', () => {
  beforeEach(createTheThree);

  it('changes the given fields, replaces the steps, and merges channel defaults', async () => {
    const res = await t.a
      .put('/v1/workflows/comment-added', {
        name: 'Comment on your post',
        steps: [{ type: 'sms', template: { content: 'New comment' } }],
        preferenceSettings: { email: false },
      })
      .expect(200);
    expect(res.body.data).toMatchObject({ workflowId: 'comment-added', name: 'Comment on your post', tags: ['social', 'comments'] });
    expect(res.body.data.steps).toEqual([{ type: 'sms', stepId: 'sms', active: true, template: { content: 'New comment' } }]);
    expect(res.body.data.preferenceSettings).toEqual({ in_app: true, email: false, sms: true, chat: true, push: true });
    expect(res.body.data.updatedAt).toBe(t.clock.now().toISOString());
  });

  it('removes the payloadSchema when given null', async () => {
    expect((await t.a.get('/v1/workflows/comment-added').expect(200)).body.data).toHaveProperty('payloadSchema');
    const res = await t.a.put('/v1/workflows/comment-added', { payloadSchema: null }).expect(200);
    expect(res.body.data).not.toHaveProperty('payloadSchema');
  });

  it('rejects a broken template or schema with 422 and changes nothing', async () => {
    await t.a.put('/v1/workflows/comment-added', { name: 'X', steps: [{ type: 'sms', template: { content: '{{' } }] }).expect(422);
    await t.a.put('/v1/workflows/comment-added', { name: 'X', payloadSchema: { type: 1 } }).expect(422);
    expect((await t.a.get('/v1/workflows/comment-added')).body.data.name).toBe('Comment added');
  });

  it('rejects an empty body, a workflowId and an active flag with 400', async () => {
    await t.a.put('/v1/workflows/comment-added', {}).expect(400);
    await t.a.put('/v1/workflows/comment-added', { workflowId: 'other' }).expect(400);
    await t.a.put('/v1/workflows/comment-added', { active: false }).expect(400);
  });

  it("answers 404 for an unknown workflow, and for another environment's", async () => {
    await t.a.put('/v1/workflows/nope', { name: 'X' }).expect(404);
    await t.b.put('/v1/workflows/comment-added', { name: 'X' }).expect(404);
  });
});

describe('PUT /workflows/{workflowId}/status (updateWorkflowStatus)', () => {
  beforeEach(createTheThree);

  it('deactivates and activates the workflow, harmlessly when unchanged', async () => {
    expect((await t.a.put('/v1/workflows/comment-added/status', { active: false }).expect(200)).body.data.active).toBe(false);
    expect((await t.a.put('/v1/workflows/comment-added/status', { active: false }).expect(200)).body.data.active).toBe(false);
    expect((await t.a.put('/v1/workflows/comment-added/status', { active: true }).expect(200)).body.data.active).toBe(true);
  });

  it('rejects a body without a boolean active with 400', async () => {
    await t.a.put('/v1/workflows/comment-added/status', {}).expect(400);
    await t.a.put('/v1/workflows/comment-added/status', { active: 'yes' }).expect(400);
  });

  it("answers 404 for an unknown workflow, and for another environment's, changing nothing", async () => {
    await t.a.put('/v1/workflows/nope/status', { active: true }).expect(404);
    await t.b.put('/v1/workflows/comment-added/status', { active: false }).expect(404);
    expect((await t.a.get('/v1/workflows/comment-added')).body.data.active).toBe(true);
  });
});

describe('GET /workflows (listWorkflows)', () => {
  beforeEach(createTheThree);

  it('lists the workflows oldest first with the exact total', async () => {
    const res = await t.a.get('/v1/workflows').expect(200);
    expect(res.body.data.map((w: { workflowId: string }) => w.workflowId)).toEqual(['comment-added', 'password-reset', 'two-emails']);
    expect(res.body).toMatchObject({ totalCount: 3, page: 0, pageSize: 10, hasMore: false });
  });

  it('filters by text in the name or workflowId, case-insensitively, with wildcards taken literally', async () => {
    expect((await t.a.get('/v1/workflows?query=COMMENT').expect(200)).body.data.map((w: { workflowId: string }) => w.workflowId)).toEqual(['comment-added']);
    expect((await t.a.get('/v1/workflows?query=reset').expect(200)).body.totalCount).toBe(1);
    expect((await t.a.get('/v1/workflows?query=%25').expect(200)).body.totalCount).toBe(0);
    expect((await t.a.get('/v1/workflows?query=_').expect(200)).body.totalCount).toBe(0);
  });

  it('filters by an exact tag', async () => {
    expect((await t.a.get('/v1/workflows?tag=social').expect(200)).body.totalCount).toBe(1);
    expect((await t.a.get('/v1/workflows?tag=soc').expect(200)).body.totalCount).toBe(0);
    expect((await t.a.get('/v1/workflows?tag=Social').expect(200)).body.totalCount).toBe(0);
  });

  it('pages with limit and rejects limit 101', async () => {
    const res = await t.a.get('/v1/workflows?limit=2&page=1').expect(200);
    expect(res.body).toMatchObject({ totalCount: 3, page: 1, pageSize: 2, hasMore: false });
    expect(res.body.data).toHaveLength(1);
    await t.a.get('/v1/workflows?limit=101').expect(400);
  });

  it("lists only the key's own environment", async () => {
    expect((await t.b.get('/v1/workflows').expect(200)).body.totalCount).toBe(0);
  });
});

describe('DELETE /workflows/{workflowId} (deleteWorkflow)', () => {
  beforeEach(createTheThree);

  it("answers 404 for another environment's workflow and leaves it", async () => {
    await t.b.delete('/v1/workflows/two-emails').expect(404);
    await t.a.get('/v1/workflows/two-emails').expect(200);
  });

  it('deletes the workflow, then answers 404', async () => {
    expect((await t.a.delete('/v1/workflows/two-emails').expect(200)).body).toEqual({ data: { acknowledged: true, status: 'deleted' } });
    await t.a.get('/v1/workflows/two-emails').expect(404);
    await t.a.delete('/v1/workflows/two-emails').expect(404);
  });

  it('frees the workflowId for a new workflow', async () => {
    await t.a.delete('/v1/workflows/two-emails').expect(200);
    await t.a.post('/v1/workflows', { name: 'Two emails' }).expect(201);
  });
});

describe('GET /workflows: text beyond ASCII, and tags holding quotes', () => {
  beforeEach(createTheThree);

  it('finds a name by any letter, in any case, and a tag only as a whole tag', async () => {
    await t.a.post('/v1/workflows', { workflowId: 'overview', name: 'Übersicht', tags: ['x"social', 'a,b'] }).expect(201);
    try {
      for (const query of ['Übersicht', 'übersicht', 'ÜBERSICHT', 'bersi']) {
        expect((await t.a.get(`/v1/workflows?query=${encodeURIComponent(query)}`).expect(200)).body.data.map((w: { workflowId: string }) => w.workflowId)).toEqual(['overview']);
      }
      // The tag's JSON text is `"x\"social"`, which holds `"social"`: only the tag `social` itself may match.
      expect((await t.a.get('/v1/workflows?tag=social').expect(200)).body.data.map((w: { workflowId: string }) => w.workflowId)).toEqual(['comment-added']);
      expect((await t.a.get(`/v1/workflows?tag=${encodeURIComponent('x"social')}`).expect(200)).body.data.map((w: { workflowId: string }) => w.workflowId)).toEqual(['overview']);
      expect((await t.a.get('/v1/workflows?tag=a').expect(200)).body.totalCount).toBe(0);
    } finally {
      await t.a.delete('/v1/workflows/overview').expect(200);
    }
  });
});

describe('/workflows/{workflowId} by the workflow’s _id (as Novu’s clients name it)', () => {
  it('carries the _id in every answer, the same on every read', async () => {
    const created = (await t.a.post('/v1/workflows', commentAdded).expect(201)).body.data;
    expect(created._id).toMatch(/^[0-9a-f]{24}$/);
    expect((await t.a.get('/v1/workflows/comment-added').expect(200)).body.data._id).toBe(created._id);
    expect((await t.a.get('/v1/workflows').expect(200)).body.data.map((w: { _id: string }) => w._id)).toEqual([created._id]);
    expect((await t.a.put('/v1/workflows/comment-added', { name: 'Renamed' }).expect(200)).body.data._id).toBe(created._id);
  });

  it('reads, updates, sets the status of and deletes a workflow named by its _id', async () => {
    const { _id } = (await t.a.post('/v1/workflows', commentAdded).expect(201)).body.data;
    expect((await t.a.get(`/v1/workflows/${_id}`).expect(200)).body.data).toMatchObject({ workflowId: 'comment-added', _id });
    expect((await t.a.put(`/v1/workflows/${_id}`, { name: 'Comment on your post' }).expect(200)).body.data).toMatchObject({ workflowId: 'comment-added', name: 'Comment on your post' });
    expect((await t.a.put(`/v1/workflows/${_id}/status`, { active: false }).expect(200)).body.data).toMatchObject({ workflowId: 'comment-added', active: false });
    expect((await t.a.get('/v1/workflows/comment-added').expect(200)).body.data).toMatchObject({ name: 'Comment on your post', active: false });
    await t.a.delete(`/v1/workflows/${_id}`).expect(200);
    await t.a.get('/v1/workflows/comment-added').expect(404);
    expect((await t.a.get(`/v1/workflows/${_id}`).expect(404)).body.message).toBe(`Workflow ${_id} not found`);
  });

  it('names by workflowId first: a workflow whose workflowId is another’s _id is the one the path names', async () => {
    const first = (await t.a.post('/v1/workflows', commentAdded).expect(201)).body.data;
    const second = (await t.a.post('/v1/workflows', { workflowId: first._id, name: 'Named like an id' }).expect(201)).body.data;
    expect((await t.a.get(`/v1/workflows/${first._id}`).expect(200)).body.data).toMatchObject({ workflowId: first._id, _id: second._id, name: 'Named like an id' });
    await t.a.delete(`/v1/workflows/${first._id}`).expect(200);
    // Now that no workflowId is that text, it names the first workflow by its _id.
    expect((await t.a.get(`/v1/workflows/${first._id}`).expect(200)).body.data).toMatchObject({ workflowId: 'comment-added', _id: first._id });
  });

  it("answers 404 for another environment's workflow by its _id, and leaves it", async () => {
    const { _id } = (await t.a.post('/v1/workflows', commentAdded).expect(201)).body.data;
    await t.b.get(`/v1/workflows/${_id}`).expect(404);
    await t.aProduction.put(`/v1/workflows/${_id}`, { name: 'Taken over' }).expect(404);
    await t.b.put(`/v1/workflows/${_id}/status`, { active: false }).expect(404);
    await t.b.delete(`/v1/workflows/${_id}`).expect(404);
    expect((await t.a.get(`/v1/workflows/${_id}`).expect(200)).body.data).toMatchObject({ name: 'Comment added', active: true });
  });
});
