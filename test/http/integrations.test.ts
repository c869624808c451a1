import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Client, useTestApp } from '../helpers/app.js';

const t = useTestApp();
// Made again before each test, in its fresh organizations.
beforeEach(async () => {
});
// Every test starts from an environment without integrations (their subscriber credentials cascade).
beforeEach(async () => {
  await t.db('integrations').delete();
});

const PASSWORD = 's3cr3t-passw0rd';
const smtp = {
  providerId: 'smtp',
  credentials: { host: 'smtp.example.com', port: 587, from: 'notifications@example.com', user: 'herald', password: PASSWORD },
};
const sendgrid = { providerId: 'sendgrid', credentials: { apiKey: 'SG.live-api-key-0123456789', from: 'notifications@example.com' } };
const twilio = { providerId: 'twilio', credentials: { accountSid: 'AC0123456789abcdef', token: 'twilio-auth-token-xyz', from: '+15005550006' } };

interface Integration {
  integrationId: string;
  identifier: string;
  providerId: string;
  channel: string;
  active: boolean;
  primary: boolean;
  credentials: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

/** Creates an integration a second after the previous one, so creation order is unambiguous. */
async function create(body: object, client: Client = t.a): Promise<Integration> {
  t.clock.advance(1000);
  return (await client.post('/v1/integrations', body).expect(201)).body.data;
}

async function all(client: Client = t.a): Promise<Integration[]> {
  return (await client.get('/v1/integrations?includeInactive=true&limit=100').expect(200)).body.data;
}

/** The identifiers of a channel's primary integrations: the invariant is that there is at most one, and it is active. */
async function primaries(channel: string, client: Client = t.a): Promise<string[]> {
  const found = (await all(client)).filter((i) => i.channel === channel && i.primary);
  for (const integration of found) expect(integration.active).toBe(true);
  return found.map((i) => i.identifier);
}

async function rawCredentials(integrationId: string): Promise<string> {
  return (await t.db('integrations').where('id', integrationId).first('credentials')).credentials;
}

describe('POST /integrations (createIntegration)', () => {
  it('creates an SMTP integration and answers 201 with it, its credentials masked', async () => {
    const res = await t.a.post('/v1/integrations', smtp).expect(201);
    const data = res.body.data;
    expect(data).toMatchObject({
      providerId: 'smtp',
      channel: 'email',
      name: 'SMTP',
      active: true,
      primary: true,
      deleted: false,
      _environmentId: t.environments.a,
      createdAt: t.clock.now().toISOString(),
      updatedAt: t.clock.now().toISOString(),
    });
    expect(data.identifier).toMatch(/^smtp-[0-9a-f]{6}$/);
    // Non-secrets of 12+ characters keep their last 4; secrets and short values are the mask alone.
    expect(data.credentials).toEqual({
      host: '********.com',
      port: '********',
      from: '********.com',
      user: '********',
      password: '********',
    });
    expect(JSON.stringify(res.body)).not.toContain(PASSWORD);
  });

  it('takes a given name, identifier and matching channel', async () => {
    const data = await create({ ...smtp, channel: 'email', name: 'Company mail server', identifier: 'company-smtp' });
    expect(data).toMatchObject({ name: 'Company mail server', identifier: 'company-smtp', channel: 'email' });
  });

  it('stringifies booleans and numbers before masking them, and shows no credential in clear', async () => {
    const data = await create({ ...smtp, credentials: { ...smtp.credentials, port: '465', secure: true, senderName: 'Example Notifications' } });
    expect(data.credentials).toMatchObject({ port: '********', secure: '********', senderName: '********ions' });
    for (const value of Object.values(data.credentials)) expect(value.startsWith('********')).toBe(true);
  });

  it('creates providers that take no credentials, on their own channel', async () => {
    expect(await create({ providerId: 'herald' })).toMatchObject({ channel: 'in_app', name: 'Herald In-App', credentials: {} });
    expect(await create({ providerId: 'slack' })).toMatchObject({ channel: 'chat', name: 'Slack', primary: true });
    expect(await create({ providerId: 'msteams' })).toMatchObject({ channel: 'chat', name: 'Microsoft Teams', primary: false });
    expect(await create({ providerId: 'expo' })).toMatchObject({ channel: 'push', credentials: {} });
  });

  it('makes the first active integration of a channel its primary, and later ones not', async () => {
    expect((await create({ ...smtp, identifier: 'first' })).primary).toBe(true);
    expect((await create({ ...sendgrid, identifier: 'second' })).primary).toBe(false);
    expect((await create({ ...twilio, identifier: 'sms' })).primary).toBe(true);
    expect(await primaries('email')).toEqual(['first']);
    expect(await primaries('sms')).toEqual(['sms']);
  });

  it('takes the primary flag from the previous primary when primary is true', async () => {
    await create({ ...smtp, identifier: 'first' });
    const second = await create({ ...sendgrid, identifier: 'second', primary: true });
    expect(second.primary).toBe(true);
    expect(await primaries('email')).toEqual(['second']);
  });

  it('leaves an integration created with primary false without the flag, even on a channel without a primary', async () => {
    expect((await create({ ...smtp, identifier: 'not-primary', primary: false })).primary).toBe(false);
    expect(await primaries('email')).toEqual([]);
  });

  it('creates an inactive integration without the primary flag, so the next active one gets it', async () => {
    const inactive = await create({ ...smtp, identifier: 'inactive', active: false });
    expect(inactive).toMatchObject({ active: false, primary: false });
    expect((await create({ ...sendgrid, identifier: 'active' })).primary).toBe(true);
  });

  it('keeps one primary per channel when integrations are created at the same time', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => t.a.post('/v1/integrations', { ...sendgrid, identifier: `race-${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual(results.map(() => 201));
    expect(await primaries('email')).toHaveLength(1);
  });

  it('rejects primary true with active false with 422 and creates nothing', async () => {
    const res = await t.a.post('/v1/integrations', { ...smtp, active: false, primary: true }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/primary', message: 'cannot be true while active is false' }]);
    expect(await all()).toEqual([]);
  });

  it("rejects a channel that is not the provider's with 422 naming body/channel", async () => {
    const res = await t.a.post('/v1/integrations', { ...smtp, channel: 'sms' }).expect(422);
    expect(res.body.message).toBe('smtp delivers email, not sms');
    expect(res.body.details).toEqual([{ field: 'body/channel', message: 'must be email for smtp' }]);
  });

  it('rejects missing credentials with 422 naming each one the provider requires', async () => {
    const res = await t.a.post('/v1/integrations', { providerId: 'smtp', credentials: { user: 'herald' } }).expect(422);
    expect(res.body.details).toEqual([
      { field: 'body/credentials/host', message: 'is required by smtp' },
      { field: 'body/credentials/port', message: 'is required by smtp' },
      { field: 'body/credentials/from', message: 'is required by smtp' },
    ]);
    const none = await t.a.post('/v1/integrations', { providerId: 'twilio' }).expect(422);
    expect(none.body.details.map((d: { field: string }) => d.field)).toEqual([
      'body/credentials/accountSid',
      'body/credentials/token',
      'body/credentials/from',
    ]);
    expect(await all()).toEqual([]);
  });

  it('counts a blank required credential as missing', async () => {
    const res = await t.a.post('/v1/integrations', { ...sendgrid, credentials: { ...sendgrid.credentials, apiKey: '  ' } }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/credentials/apiKey', message: 'is required by sendgrid' }]);
  });

  it('rejects a key sent in an HTTP header that a header cannot hold, without quoting it', async () => {
    for (const apiKey of ['abc\r\nX-Injected: 1', 'key with spaces', 'clé€']) {
      const res = await t.a.post('/v1/integrations', { ...sendgrid, credentials: { ...sendgrid.credentials, apiKey } }).expect(422);
      expect(res.body.details).toEqual([{ field: 'body/credentials/apiKey', message: 'must be printable ASCII without spaces: it is sent in an HTTP header' }]);
      expect(JSON.stringify(res.body)).not.toContain(apiKey);
    }
    const expo = await t.a.post('/v1/integrations', { providerId: 'expo', credentials: { apiKey: 'a\tb' } }).expect(422);
    expect(expo.body.details).toEqual([{ field: 'body/credentials/apiKey', message: 'must be printable ASCII without spaces: it is sent in an HTTP header' }]);
  });

  it('rejects credentials the provider does not use with 422, without quoting any value', async () => {
    const res = await t.a
      .post('/v1/integrations', { ...sendgrid, credentials: { ...sendgrid.credentials, password: PASSWORD, region: 'eu' } })
      .expect(422);
    expect(res.body.details).toEqual([
      { field: 'body/credentials/password', message: 'is not used by sendgrid' },
      { field: 'body/credentials/region', message: 'is not used by sendgrid' },
    ]);
    expect(res.body.message).toBe('The credentials do not fit sendgrid: password is not used by sendgrid; region is not used by sendgrid');
    expect(JSON.stringify(res.body)).not.toContain(PASSWORD);
    expect(JSON.stringify(res.body)).not.toContain(sendgrid.credentials.apiKey);
    const chat = await t.a.post('/v1/integrations', { providerId: 'discord', credentials: { webhookUrl: 'https://example.com/x' } }).expect(422);
    expect(chat.body.details).toEqual([{ field: 'body/credentials/webhookUrl', message: 'is not used by discord' }]);
  });

  it('takes a port as a number or a string of digits, and rejects one out of range with 422', async () => {
    await create({ ...smtp, credentials: { ...smtp.credentials, port: '2525' } });
    const res = await t.a.post('/v1/integrations', { ...smtp, credentials: { ...smtp.credentials, port: '70000' } }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/credentials/port', message: 'must be a port number from 1 to 65535' }]);
  });

  it('rejects an identifier already used in the environment with 409 and keeps the first', async () => {
    await create({ ...smtp, identifier: 'company-smtp', name: 'First' });
    const res = await t.a.post('/v1/integrations', { ...sendgrid, identifier: 'company-smtp' }).expect(409);
    expect(res.body.message).toBe('Integration identifier company-smtp already exists');
    expect((await all()).map((i) => i.providerId)).toEqual(['smtp']);
  });

  it('accepts the same identifier in another environment, each with its own primary', async () => {
    await create({ ...smtp, identifier: 'company-smtp' });
    expect((await create({ ...smtp, identifier: 'company-smtp' }, t.aProduction)).primary).toBe(true);
    expect((await create({ ...smtp, identifier: 'company-smtp' }, t.b)).primary).toBe(true);
    expect(await all()).toHaveLength(1);
  });

  it('rejects bodies that break the schema with 400 naming the field', async () => {
    const unknownProvider = await t.a.post('/v1/integrations', { providerId: 'mailgun' }).expect(400);
    expect(unknownProvider.body.details[0].field).toBe('body/providerId');
    const fields = (await t.a.post('/v1/integrations', { channel: 'email', priority: 1 }).expect(400)).body.details.map(
      (d: { field: string }) => d.field,
    );
    expect(fields).toEqual(expect.arrayContaining(['body/providerId', 'body/priority']));
    const badCredential = await t.a.post('/v1/integrations', { ...smtp, credentials: { ...smtp.credentials, colour: 'blue' } }).expect(400);
    expect(badCredential.body.details).toEqual([{ field: 'body/credentials/colour', message: 'is not allowed' }]);
    const badIdentifier = await t.a.post('/v1/integrations', { ...smtp, identifier: 'has space' }).expect(400);
    expect(badIdentifier.body.details[0].field).toBe('body/identifier');
    await t.a.post('/v1/integrations', { ...smtp, credentials: { ...smtp.credentials, port: 'smtp' } }).expect(400);
    const longSecret = `${PASSWORD}-${'x'.repeat(1024)}`;
    const tooLong = await t.a.post('/v1/integrations', { ...smtp, credentials: { ...smtp.credentials, password: longSecret } }).expect(400);
    expect(tooLong.body.details[0].field).toBe('body/credentials/password');
    expect(JSON.stringify(tooLong.body)).not.toContain(PASSWORD);
    expect(await all()).toEqual([]);
  });
});

describe('GET /integrations (listIntegrations)', () => {
  beforeEach(async () => {
    await create({ ...smtp, identifier: 'smtp' });
    await create({ ...sendgrid, identifier: 'sendgrid-off', active: false });
    await create({ ...twilio, identifier: 'twilio' });
    await create({ providerId: 'slack', identifier: 'slack' });
    await create({ ...sendgrid, identifier: 'sendgrid' });
    await create({ ...twilio, identifier: 'other-org' }, t.b);
  });

  it('lists the active integrations, oldest first, in the list envelope', async () => {
    const res = await t.a.get('/v1/integrations').expect(200);
    expect(res.body).toMatchObject({ totalCount: 4, page: 0, pageSize: 10, hasMore: false });
    expect(res.body.data.map((i: Integration) => i.identifier)).toEqual(['smtp', 'twilio', 'slack', 'sendgrid']);
  });

  it('lists inactive ones too with includeInactive=true', async () => {
    const res = await t.a.get('/v1/integrations?includeInactive=true').expect(200);
    expect(res.body.totalCount).toBe(5);
    expect(res.body.data.map((i: Integration) => i.identifier)).toEqual(['smtp', 'sendgrid-off', 'twilio', 'slack', 'sendgrid']);
    expect((await t.a.get('/v1/integrations?includeInactive=false').expect(200)).body.totalCount).toBe(4);
  });

  it('filters by channel, with or without inactive ones', async () => {
    const email = await t.a.get('/v1/integrations?channel=email').expect(200);
    expect(email.body.data.map((i: Integration) => i.identifier)).toEqual(['smtp', 'sendgrid']);
    const allEmail = await t.a.get('/v1/integrations?channel=email&includeInactive=true').expect(200);
    expect(allEmail.body.data.map((i: Integration) => i.identifier)).toEqual(['smtp', 'sendgrid-off', 'sendgrid']);
    expect((await t.a.get('/v1/integrations?channel=push').expect(200)).body).toMatchObject({ data: [], totalCount: 0 });
  });

  it('pages through them with limit and page', async () => {
    const second = await t.a.get('/v1/integrations?limit=3&page=1').expect(200);
    expect(second.body).toMatchObject({ totalCount: 4, page: 1, pageSize: 3, hasMore: false });
    expect(second.body.data.map((i: Integration) => i.identifier)).toEqual(['sendgrid']);
    expect((await t.a.get('/v1/integrations?pageSize=2').expect(200)).body).toMatchObject({ pageSize: 2, hasMore: true });
  });

  it('shows every credential masked', async () => {
    const [first] = (await t.a.get('/v1/integrations').expect(200)).body.data;
    expect(first.credentials).toEqual({ host: '********.com', port: '********', from: '********.com', user: '********', password: '********' });
  });

  it("lists only the key's own environment", async () => {
    const res = await t.b.get('/v1/integrations').expect(200);
    expect(res.body.data.map((i: Integration) => i.identifier)).toEqual(['other-org']);
    expect((await t.aProduction.get('/v1/integrations?includeInactive=true').expect(200)).body.totalCount).toBe(0);
  });

  it('rejects a bad includeInactive, channel or limit with 400 naming the parameter', async () => {
    expect((await t.a.get('/v1/integrations?includeInactive=maybe').expect(400)).body.details[0].field).toBe('query/includeInactive');
    expect((await t.a.get('/v1/integrations?channel=fax').expect(400)).body.details[0].field).toBe('query/channel');
    expect((await t.a.get('/v1/integrations?limit=0').expect(400)).body.details[0].field).toBe('query/limit');
  });
});

describe('PUT /integrations/{integrationId} (updateIntegration)', () => {
  it('changes the given fields, keeps the others, and moves updatedAt', async () => {
    const created = await create({ ...smtp, identifier: 'company-smtp', name: 'Mail' });
    t.clock.advance(60_000);
    const res = await t.a.put(`/v1/integrations/${created.integrationId}`, { name: 'Company mail', identifier: 'mail' }).expect(200);
    expect(res.body.data).toMatchObject({
      integrationId: created.integrationId,
      name: 'Company mail',
      identifier: 'mail',
      active: true,
      primary: true,
      credentials: created.credentials,
      createdAt: created.createdAt,
      updatedAt: t.clock.now().toISOString(),
    });
  });

  it('replaces the credentials as a whole and checks them again', async () => {
    const created = await create(smtp);
    const rotated = { host: 'mail.example.org', port: 2525, from: 'ops@example.org' };
    const res = await t.a.put(`/v1/integrations/${created.integrationId}`, { credentials: rotated }).expect(200);
    expect(res.body.data.credentials).toEqual({ host: '********.org', port: '********', from: '********.org' });
    const bad = await t.a.put(`/v1/integrations/${created.integrationId}`, { credentials: { host: 'x', apiKey: 'SG.nope' } }).expect(422);
    expect(bad.body.details).toEqual([
      { field: 'body/credentials/port', message: 'is required by smtp' },
      { field: 'body/credentials/from', message: 'is required by smtp' },
      { field: 'body/credentials/apiKey', message: 'is not used by smtp' },
    ]);
    expect(JSON.stringify(bad.body)).not.toContain('SG.nope');
    expect((await all())[0].credentials).toEqual({ host: '********.org', port: '********', from: '********.org' });
  });

  it('rejects an identifier another integration has with 409, but accepts its own', async () => {
    await create({ ...smtp, identifier: 'taken' });
    const other = await create({ ...sendgrid, identifier: 'mine' });
    const res = await t.a.put(`/v1/integrations/${other.integrationId}`, { identifier: 'taken', name: 'Renamed' }).expect(409);
    expect(res.body.message).toBe('Integration identifier taken already exists');
    await t.a.put(`/v1/integrations/${other.integrationId}`, { identifier: 'mine' }).expect(200);
    expect((await all()).map((i) => [i.identifier, i.providerId])).toEqual([
      ['taken', 'smtp'],
      ['mine', 'sendgrid'],
    ]);
  });

  it('moves the primary flag with primary true, leaving one primary', async () => {
    await create({ ...smtp, identifier: 'first' });
    const second = await create({ ...sendgrid, identifier: 'second' });
    expect((await t.a.put(`/v1/integrations/${second.integrationId}`, { primary: true }).expect(200)).body.data.primary).toBe(true);
    expect(await primaries('email')).toEqual(['second']);
  });

  it('hands the flag to the oldest other active integration with primary false', async () => {
    const first = await create({ ...smtp, identifier: 'first' });
    await create({ ...sendgrid, identifier: 'inactive', active: false });
    await create({ ...sendgrid, identifier: 'second' });
    await create({ ...sendgrid, identifier: 'third' });
    expect((await t.a.put(`/v1/integrations/${first.integrationId}`, { primary: false }).expect(200)).body.data.primary).toBe(false);
    expect(await primaries('email')).toEqual(['second']);
  });

  it('activates an integration with primary true in one request, and refuses primary true on an inactive one with 422', async () => {
    await create({ ...smtp, identifier: 'first' });
    const off = await create({ ...sendgrid, identifier: 'off', active: false });
    const res = await t.a.put(`/v1/integrations/${off.integrationId}`, { primary: true }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/primary', message: 'cannot be true while active is false' }]);
    await t.a.put(`/v1/integrations/${off.integrationId}`, { active: false, primary: true }).expect(422);
    expect(await primaries('email')).toEqual(['first']);
    const on = await t.a.put(`/v1/integrations/${off.integrationId}`, { active: true, primary: true }).expect(200);
    expect(on.body.data).toMatchObject({ active: true, primary: true });
    expect(await primaries('email')).toEqual(['off']);
  });

  it('deactivating the primary through an update promotes the oldest other active one', async () => {
    const first = await create({ ...smtp, identifier: 'first' });
    await create({ ...sendgrid, identifier: 'second' });
    const res = await t.a.put(`/v1/integrations/${first.integrationId}`, { active: false }).expect(200);
    expect(res.body.data).toMatchObject({ active: false, primary: false });
    expect(await primaries('email')).toEqual(['second']);
  });

  it('rejects an empty body, an unknown field and a change of provider with 400', async () => {
    const created = await create(smtp);
    await t.a.put(`/v1/integrations/${created.integrationId}`, {}).expect(400);
    const res = await t.a.put(`/v1/integrations/${created.integrationId}`, { providerId: 'sendgrid' }).expect(400);
    expect(res.body.details).toEqual([{ field: 'body/providerId', message: 'is not allowed' }]);
  });

  it('answers 404 for an unknown id, and for an integration of another environment, changing nothing', async () => {
    const created = await create({ ...smtp, name: 'Mine' });
    const res = await t.a.put('/v1/integrations/0194f2a1c3b27e4d9a1f0c30', { name: 'X' }).expect(404);
    expect(res.body.message).toBe('Integration 0194f2a1c3b27e4d9a1f0c30 not found');
    await t.a.put('/v1/integrations/not-an-id', { name: 'X' }).expect(404);
    await t.b.put(`/v1/integrations/${created.integrationId}`, { name: 'Stolen', primary: false }).expect(404);
    await t.aProduction.put(`/v1/integrations/${created.integrationId}`, { active: false }).expect(404);
    expect((await all())[0]).toMatchObject({ name: 'Mine', active: true, primary: true });
  });
});

describe('PUT /integrations/{integrationId}/status (updateIntegrationStatus)', () => {
  it('deactivates the primary and promotes the oldest other active integration of its channel', async () => {
    const first = await create({ ...smtp, identifier: 'first' });
    await create({ ...sendgrid, identifier: 'inactive', active: false });
    await create({ ...sendgrid, identifier: 'second' });
    await create({ ...sendgrid, identifier: 'third' });
    await create({ ...twilio, identifier: 'sms' });
    t.clock.advance(1000);
    const res = await t.a.put(`/v1/integrations/${first.integrationId}/status`, { active: false }).expect(200);
    expect(res.body.data).toMatchObject({ active: false, primary: false, updatedAt: t.clock.now().toISOString() });
    expect(await primaries('email')).toEqual(['second']);
    expect(await primaries('sms')).toEqual(['sms']);
  });

  it('deactivates an integration that is not primary without moving the flag', async () => {
    await create({ ...smtp, identifier: 'first' });
    const second = await create({ ...sendgrid, identifier: 'second' });
    await t.a.put(`/v1/integrations/${second.integrationId}/status`, { active: false }).expect(200);
    expect(await primaries('email')).toEqual(['first']);
  });

  it('leaves the channel without a primary when its last active integration is deactivated', async () => {
    const only = await create(smtp);
    await t.a.put(`/v1/integrations/${only.integrationId}/status`, { active: false }).expect(200);
    expect(await primaries('email')).toEqual([]);
  });

  it('makes an integration it activates primary when its channel has none, and not when it has one', async () => {
    const first = await create({ ...smtp, identifier: 'first', active: false });
    const second = await create({ ...sendgrid, identifier: 'second', active: false });
    const on = await t.a.put(`/v1/integrations/${second.integrationId}/status`, { active: true }).expect(200);
    expect(on.body.data).toMatchObject({ active: true, primary: true });
    const also = await t.a.put(`/v1/integrations/${first.integrationId}/status`, { active: true }).expect(200);
    expect(also.body.data).toMatchObject({ active: true, primary: false });
    expect(await primaries('email')).toEqual(['second']);
  });

  it('treats the same status again as harmless: nothing changes, not even updatedAt', async () => {
    const created = await create(smtp);
    t.clock.advance(60_000);
    const res = await t.a.put(`/v1/integrations/${created.integrationId}/status`, { active: true }).expect(200);
    expect(res.body.data).toMatchObject({ active: true, primary: true, updatedAt: created.updatedAt });
    const off = await create({ ...sendgrid, active: false });
    await t.a.put(`/v1/integrations/${off.integrationId}/status`, { active: false }).expect(200);
    expect(await primaries('email')).toEqual([created.identifier]);
  });

  it('rejects a body without a boolean active with 400', async () => {
    const created = await create(smtp);
    expect((await t.a.put(`/v1/integrations/${created.integrationId}/status`, {}).expect(400)).body.details[0].field).toBe('body/active');
    await t.a.put(`/v1/integrations/${created.integrationId}/status`, { active: 'no' }).expect(400);
  });

  it('answers 404 for an unknown id, and for an integration of another environment, changing nothing', async () => {
    const created = await create(smtp);
    const res = await t.a.put('/v1/integrations/0194f2a1c3b27e4d9a1f0c30/status', { active: false }).expect(404);
    expect(res.body.message).toBe('Integration 0194f2a1c3b27e4d9a1f0c30 not found');
    await t.b.put(`/v1/integrations/${created.integrationId}/status`, { active: false }).expect(404);
    await t.aProduction.put(`/v1/integrations/${created.integrationId}/status`, { active: false }).expect(404);
    expect((await all())[0]).toMatchObject({ active: true, primary: true });
  });
});

describe('DELETE /integrations/{integrationId} (deleteIntegration)', () => {
  it('deletes the integration and answers with the ones that remain, every status, oldest first', async () => {
    await create({ ...smtp, identifier: 'smtp' });
    const gone = await create({ ...sendgrid, identifier: 'gone' });
    await create({ ...twilio, identifier: 'off', active: false });
    await create({ providerId: 'slack', identifier: 'slack' });
    const res = await t.a.delete(`/v1/integrations/${gone.integrationId}`).expect(200);
    expect(res.body.data.map((i: Integration) => i.identifier)).toEqual(['smtp', 'off', 'slack']);
    expect(res.body.data[0].credentials.password).toBe('********');
    expect((await all()).map((i) => i.identifier)).toEqual(['smtp', 'off', 'slack']);
  });

  it('promotes the oldest remaining active integration when it deletes the primary', async () => {
    const first = await create({ ...smtp, identifier: 'first' });
    await create({ ...sendgrid, identifier: 'inactive', active: false });
    await create({ ...sendgrid, identifier: 'second' });
    await create({ ...sendgrid, identifier: 'third' });
    const res = await t.a.delete(`/v1/integrations/${first.integrationId}`).expect(200);
    expect(res.body.data.filter((i: Integration) => i.primary).map((i: Integration) => i.identifier)).toEqual(['second']);
    expect(await primaries('email')).toEqual(['second']);
  });

  it('answers an empty list when the last one goes', async () => {
    const only = await create(smtp);
    expect((await t.a.delete(`/v1/integrations/${only.integrationId}`).expect(200)).body).toEqual({ data: [] });
  });

  it("removes its subscribers' credentials with it", async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'grace' }).expect(201);
    const slack = await create({ providerId: 'slack' });
    const discord = await create({ providerId: 'discord' });
    await t.a.put('/v1/subscribers/grace/credentials', { providerId: 'slack', credentials: { webhookUrl: 'https://hooks.slack.com/services/T/B/X' } }).expect(200);
    await t.a.put('/v1/subscribers/grace/credentials', { providerId: 'discord', credentials: { webhookUrl: 'https://discord.com/api/webhooks/1/x' } }).expect(200);
    await t.a.delete(`/v1/integrations/${slack.integrationId}`).expect(200);
    const channels = (await t.a.get('/v1/subscribers/grace').expect(200)).body.data.channels;
    expect(channels.map((c: { _integrationId: string }) => c._integrationId)).toEqual([discord.integrationId]);
  });

  it('answers 404 the second time, and for an integration of another environment, deleting nothing', async () => {
    const kept = await create({ ...smtp, identifier: 'kept' });
    const gone = await create({ ...sendgrid, identifier: 'gone' });
    await t.a.delete(`/v1/integrations/${gone.integrationId}`).expect(200);
    const res = await t.a.delete(`/v1/integrations/${gone.integrationId}`).expect(404);
    expect(res.body.message).toBe(`Integration ${gone.integrationId} not found`);
    await t.b.delete(`/v1/integrations/${kept.integrationId}`).expect(404);
    await t.aProduction.delete(`/v1/integrations/${kept.integrationId}`).expect(404);
    expect((await all()).map((i) => i.identifier)).toEqual(['kept']);
  });
});

describe('credentials at rest', () => {
  const SECRET = 'test-herald-secret-0123456789';
  afterEach(() => {
    t.deps.config.secret = undefined;
  });

  it('are sealed when HERALD_SECRET is set, and still come back masked', async () => {
    t.deps.config.secret = SECRET;
    const created = await create(smtp);
    const raw = await rawCredentials(created.integrationId);
    expect(raw.startsWith('enc:v1:')).toBe(true);
    expect(raw).not.toContain(PASSWORD);
    expect(raw).not.toContain('smtp.example.com');
    expect(created.credentials).toEqual({ host: '********.com', port: '********', from: '********.com', user: '********', password: '********' });
    expect((await all())[0].credentials).toEqual(created.credentials);
  });

  it('are sealed again on every write, with a fresh IV', async () => {
    t.deps.config.secret = SECRET;
    const created = await create(smtp);
    const before = await rawCredentials(created.integrationId);
    await t.a.put(`/v1/integrations/${created.integrationId}`, { credentials: smtp.credentials }).expect(200);
    const after = await rawCredentials(created.integrationId);
    expect(after.startsWith('enc:v1:')).toBe(true);
    expect(after).not.toBe(before);
  });

  it('are plain JSON without a secret, and get sealed on their next write once one is set', async () => {
    const created = await create(smtp);
    expect(JSON.parse(await rawCredentials(created.integrationId))).toEqual(smtp.credentials);
    t.deps.config.secret = SECRET;
    expect((await all())[0].credentials.host).toBe('********.com');
    await t.a.put(`/v1/integrations/${created.integrationId}/status`, { active: false }).expect(200);
    const raw = await rawCredentials(created.integrationId);
    expect(raw.startsWith('enc:v1:')).toBe(true);
    expect(raw).not.toContain(PASSWORD);
  });

  it('that cannot be opened (secret removed or changed) answer 500 without revealing why', async () => {
    t.deps.config.secret = SECRET;
    await create(smtp);
    for (const secret of [undefined, 'another-secret']) {
      t.deps.config.secret = secret;
      const res = await t.a.get('/v1/integrations').expect(500);
      expect(res.body.message).toMatch(/^Something went wrong on our side; request id /);
      expect(JSON.stringify(res.body)).not.toMatch(/HERALD_SECRET|decrypt|s3cr3t/);
    }
  });
});
