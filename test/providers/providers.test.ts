import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { LOCAL_PEERS, startHttpPeer, startSmtpPeer } from '../helpers/peers.js';
import { DEFAULT_PROVIDER_TIMEOUTS } from '../../src/outbound-guard.js';
import { senders } from '../../src/providers/index.js';
import { ProviderError } from '../../src/providers/types.js';

// Each provider against a real server on 127.0.0.1: what it sends, and how it reads failures.
const delivery = { deliveryId: '0194f2a1c3b27e4d9a1f0c41', outbound: { allowedNetworks: [LOCAL_PEERS], timeouts: DEFAULT_PROVIDER_TIMEOUTS } };
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});
async function peer(respond?: Parameters<typeof startHttpPeer>[0]) {
  const server = await startHttpPeer(respond);
  closers.push(server.close);
  return server;
}
async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

describe('sendgrid (email)', () => {
  it('posts a v3 mail/send request with the API key and the delivery id', async () => {
    const server = await peer(() => ({ status: 202, body: '' }));
    await senders.email.sendgrid!.send(
      { to: 'ada@example.com', subject: 'Hi', html: '<p>x</p>' },
      { apiKey: 'SG.key', from: 'no-reply@example.com', senderName: 'Herald', baseUrl: server.url },
      delivery,
    );
    const [request] = server.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/v3/mail/send' });
    expect(request.headers.authorization).toBe('Bearer SG.key');
    expect(request.headers['x-herald-delivery-id']).toBe(delivery.deliveryId);
    expect(request.json()).toMatchObject({
      personalizations: [{ to: [{ email: 'ada@example.com' }] }],
      from: { email: 'no-reply@example.com', name: 'Herald' },
      subject: 'Hi',
      content: [{ type: 'text/html', value: '<p>x</p>' }],
    });
  });

  it('sends the preheader, escaped, as the hidden start of the HTML body', async () => {
    const server = await peer(() => ({ status: 202, body: '' }));
    await senders.email.sendgrid!.send({ to: 'ada@example.com', subject: 'Hi', html: '<p>x</p>', preheader: 'Soon <b>' }, { apiKey: 'SG.key', from: 'no-reply@example.com', baseUrl: server.url }, delivery);
    expect((server.requests[0].json() as { content: unknown }).content).toEqual([{ type: 'text/html', value: '<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">Soon &lt;b&gt;</div><p>x</p>' }]);
  });

  it('reads 401 as permanent, 429 and 503 as worth retrying', async () => {
    for (const [status, permanent] of [
      [401, true],
      [429, false],
      [503, false],
    ] as const) {
      const server = await peer(() => ({ status, body: 'nope' }));
      const err = await failure(
        senders.email.sendgrid!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { apiKey: 'k', from: 'f@b.co', baseUrl: server.url }, delivery),
      );
      expect(err.permanent).toBe(permanent);
      expect(err.raw).toBe(`${status} nope`);
    }
  });
});

describe('smtp (email)', () => {
  it('reads a 5xx reply as permanent and a 4xx reply as worth retrying', async () => {
    for (const [code, permanent] of [
      [550, true],
      [451, false],
    ] as const) {
      const smtp = await startSmtpPeer({ reject: () => ({ code, message: 'refused' }) });
      closers.push(smtp.close);
      const err = await failure(
        senders.email.smtp!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { host: '127.0.0.1', port: smtp.port, from: 'f@b.co' }, delivery),
      );
      expect(err.permanent).toBe(permanent);
    }
  });

  it('reads a refused connection as worth retrying', async () => {
    const err = await failure(senders.email.smtp!.send({ to: 'a@b.co', subject: 's', html: 'h' }, { host: '127.0.0.1', port: 1, from: 'f@b.co' }, delivery));
    expect(err.permanent).toBe(false);
  });
});

describe('twilio (sms)', () => {
  it('posts the Messages API form with basic auth', async () => {
    const server = await peer(() => ({ status: 201, body: '{"sid":"SM1"}' }));
    await senders.sms.twilio!.send({ to: '+447700900123', content: 'Code 1234' }, { accountSid: 'AC1', token: 'tok', from: '+15005550006', baseUrl: server.url }, delivery);
    const [request] = server.requests;
    expect(request.path).toBe('/2010-04-01/Accounts/AC1/Messages.json');
    expect(request.headers.authorization).toBe(`Basic ${Buffer.from('AC1:tok').toString('base64')}`);
    expect(request.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(request.body))).toEqual({ To: '+447700900123', From: '+15005550006', Body: 'Code 1234' });
  });

  it('adds its path to a baseUrl’s path and keeps the baseUrl’s query after it (a proxy)', async () => {
    const server = await peer(() => ({ status: 201, body: '{"sid":"SM1"}' }));
    const credentials = { accountSid: 'AC1', token: 'tok', from: '+15005550006' };
    await senders.sms.twilio!.send({ to: '+447700900123', content: 'x' }, { ...credentials, baseUrl: `${server.url}/proxy?tenant=acme` }, delivery);
    await senders.sms.twilio!.send({ to: '+447700900123', content: 'x' }, { ...credentials, baseUrl: `${server.url}/proxy/` }, delivery);
    expect(server.requests.map((r) => r.path)).toEqual(['/proxy/2010-04-01/Accounts/AC1/Messages.json?tenant=acme', '/proxy/2010-04-01/Accounts/AC1/Messages.json']);
  });

  it('fails for good, without a request, when a stored baseUrl is not a URL', async () => {
    const err = await failure(senders.sms.twilio!.send({ to: '+447700900123', content: 'x' }, { accountSid: 'AC1', token: 'tok', from: '+1', baseUrl: 'not a url' }, delivery));
    expect(err.permanent).toBe(true);
  });
});

describe('chat webhooks', () => {
  it('posts each provider’s own body shape', async () => {
    const server = await peer();
    for (const provider of ['slack', 'discord', 'msteams'] as const) {
      await senders.chat[provider]!.send({ webhookUrl: `${server.url}/${provider}`, content: 'Deploy done' }, {}, delivery);
    }
    expect(server.requests.map((r) => [r.path, r.json()])).toEqual([
      ['/slack', { text: 'Deploy done' }],
      ['/discord', { content: 'Deploy done' }],
      ['/msteams', { text: 'Deploy done' }],
    ]);
  });

  it('reads an unreachable webhook as worth retrying', async () => {
    const err = await failure(senders.chat.slack!.send({ webhookUrl: 'http://127.0.0.1:1/hook', content: 'x' }, {}, delivery));
    expect(err.permanent).toBe(false);
  });
});

describe('expo (push)', () => {
  it('posts one message per device token, with the access token when there is one', async () => {
    const server = await peer(() => ({ status: 200, body: '{"data":[{"status":"ok"},{"status":"ok"}]}' }));
    await senders.push.expo!.send(
      { deviceTokens: ['ExponentPushToken[a]', 'ExponentPushToken[b]'], title: 'T', content: 'C', data: { id: 1 }, subscriberId: 'ada' },
      { apiKey: 'expo-token', baseUrl: server.url },
      delivery,
    );
    const [request] = server.requests;
    expect(request.path).toBe('/--/api/v2/push/send');
    expect(request.headers.authorization).toBe('Bearer expo-token');
    expect(request.json()).toEqual([
      { to: 'ExponentPushToken[a]', title: 'T', body: 'C', data: { id: 1 } },
      { to: 'ExponentPushToken[b]', title: 'T', body: 'C', data: { id: 1 } },
    ]);
  });

  it("fails for good, naming Expo's error, when the whole request is refused (errors, no tickets), even with a 200", async () => {
    const server = await peer(() => ({ status: 200, body: '{"errors":[{"code":"PUSH_TOO_MANY_EXPERIENCE_IDS","message":"All push notification messages in the same request must be for the same project"}]}' }));
    const err = await failure(senders.push.expo!.send({ deviceTokens: ['x', 'y'], title: 'T', content: 'C', subscriberId: 'ada' }, { baseUrl: server.url }, delivery));
    expect(err).toMatchObject({ permanent: true, message: 'Expo refused the request: PUSH_TOO_MANY_EXPERIENCE_IDS' });
  });

  it('counts an answer it cannot read as accepted (sending again could duplicate it), and says that no outcome per device is known', async () => {
    const server = await peer(() => ({ status: 200, body: '{not json' }));
    const sent = await senders.push.expo!.send({ deviceTokens: ['x', 'y'], title: 'T', content: 'C', subscriberId: 'ada' }, { baseUrl: server.url }, delivery);
    expect(sent.outcomes).toBeUndefined();
    expect(sent.note).toContain('no outcome per device is known');
  });

  it('fails for good when every device is refused', async () => {
    const server = await peer(() => ({ status: 200, body: '{"data":[{"status":"error","details":{"error":"DeviceNotRegistered"}}]}' }));
    const err = await failure(senders.push.expo!.send({ deviceTokens: ['x'], title: 'T', content: 'C', subscriberId: 'ada' }, { baseUrl: server.url }, delivery));
    expect(err).toMatchObject({ permanent: true, message: 'Expo refused every device: DeviceNotRegistered' });
  });
});

describe('push-webhook (push)', () => {
  it('posts the notification signed with the integration secret', async () => {
    const server = await peer();
    await senders.push['push-webhook']!.send(
      { deviceTokens: ['t1'], title: 'T', content: 'C', subscriberId: 'ada' },
      { webhookUrl: `${server.url}/push`, secretKey: 's3cret' },
      delivery,
    );
    const [request] = server.requests;
    expect(request.json()).toEqual({ deliveryId: delivery.deliveryId, subscriberId: 'ada', deviceTokens: ['t1'], title: 'T', content: 'C', data: {} });
    // Standard Webhooks: the id, the time and the body signed together, checked as a receiver would.
    expect(request.headers['webhook-id']).toBe(delivery.deliveryId);
    const verified = new Webhook('s3cret', { format: 'raw' }).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
    expect(verified).toEqual(request.json());
    const expected = createHmac('sha256', 's3cret').update(`${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body}`).digest('base64');
    expect(request.headers['webhook-signature']).toBe(`v1,${expected}`);
    expect(request.headers).not.toHaveProperty('x-herald-signature');
  });

  it('takes a whsec_ secret as Standard Webhooks gives it, and signs the time: a replay cannot pass with a fresh timestamp', async () => {
    const secret = `whsec_${Buffer.from('a key of 24 bytes or so!').toString('base64')}`;
    const server = await peer();
    await senders.push['push-webhook']!.send({ deviceTokens: ['t1'], title: 'T', content: 'C', subscriberId: 'ada' }, { webhookUrl: `${server.url}/push`, secretKey: secret }, delivery);
    const [request] = server.requests;
    const headers = { 'webhook-id': String(request.headers['webhook-id']), 'webhook-timestamp': String(request.headers['webhook-timestamp']), 'webhook-signature': String(request.headers['webhook-signature']) };
    expect(new Webhook(secret).verify(request.body, headers)).toEqual(request.json());
    const refreshed = { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 60) };
    expect(() => new Webhook(secret).verify(request.body, refreshed)).toThrow(/signature/i);
  });
});
