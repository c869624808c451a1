import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

const ERROR_FIELDS = ['statusCode', 'error', 'message', 'timestamp', 'path'];

describe('errors from every layer carry the same body', () => {
  it('404 for an unknown route under /v1', async () => {
    const res = await t.a.get('/v1/no-such-thing').expect(404);
    expect(res.body).toMatchObject({ statusCode: 404, error: 'Not Found', path: '/v1/no-such-thing' });
    expect(Object.keys(res.body)).toEqual(expect.arrayContaining(ERROR_FIELDS));
  });

  it('404 for a path in another letter case: paths match letter for letter', async () => {
    await t.a.get('/V1/subscribers').expect(404);
    await t.a.get('/v1/Subscribers').expect(404);
  });

  it('404 as JSON for an unknown route outside /v1, too', async () => {
    const res = await t.http.get('/nowhere').expect(404).expect('Content-Type', /application\/json/);
    expect(res.body.statusCode).toBe(404);
  });

  it('405 with Allow for a method the path does not accept', async () => {
    const res = await t.a.patch('/v1/subscribers/ada', { firstName: 'x' }).expect(405).expect('Allow', 'DELETE, GET, HEAD, PUT');
    expect(res.body).toMatchObject({ statusCode: 405, error: 'Method Not Allowed' });
    await t.a.delete('/v1/subscribers').expect(405).expect('Allow', 'GET, HEAD, POST');
    await t.a.get('/v1/events/trigger').expect(405).expect('Allow', 'POST');
  });

  it('answers HEAD wherever GET is allowed: the same status and headers, no body', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'heady' }).expect(201);
    const got = await t.a.get('/v1/subscribers/heady').expect(200);
    const head = await t.a.head('/v1/subscribers/heady').expect(200).expect('Content-Type', /application\/json/);
    expect(head.headers['content-length']).toBe(got.headers['content-length']);
    expect(head.text ?? '').toBe('');
    await t.a.head('/v1/subscribers/nobody').expect(404);
    await t.a.head('/v1/subscribers?limit=5').expect(200);
    await t.http.head('/v1/subscribers').expect(401);
    await t.a.head('/v1/events/trigger').expect(405).expect('Allow', 'POST');
  });

  it('405 with Allow for a method the paths outside the contract do not accept', async () => {
    for (const [method, path] of [['post', '/health'], ['delete', '/ready'], ['post', '/metrics'], ['put', '/v1/openapi.yaml'], ['delete', '/docs']] as const) {
      const res = await t.http[method](path).expect(405).expect('Allow', 'GET, HEAD');
      expect(res.body).toMatchObject({ statusCode: 405, error: 'Method Not Allowed', message: `${method.toUpperCase()} is not allowed on ${path}`, path });
    }
  });

  it('400 for a path or a query whose percent-encoding is broken, naming which', async () => {
    const path = await t.a.get('/v1/subscribers/ada%zz').expect(400);
    expect(path.body).toMatchObject({ statusCode: 400, details: [{ field: 'path', message: 'is not valid URL encoding' }] });
    // Before, the query parser kept these as they came: `%zz` as text, `%FF` as U+FFFD.
    for (const query of ['limit=5&after=%zz', 'limit=%FF', 'limit=%C3%28', 'limit=5%']) {
      const res = await t.a.get(`/v1/subscribers?${query}`).expect(400);
      expect(res.body, query).toMatchObject({ statusCode: 400, message: 'The query is not valid URL encoding: a % must start an escaped UTF-8 byte such as %2F', details: [{ field: 'query', message: 'is not valid URL encoding' }] });
    }
    await t.a.get('/v1/subscribers?limit=%35').expect(200);
    await t.a.get('/v1/notifications?workflowId=caf%C3%A9').expect(200);
  });

  it('400 for a body that is not JSON', async () => {
    const res = await t.a
      .post('/v1/subscribers')
      .set('Content-Type', 'application/json')
      .send('{"subscriberId": ')
      .expect(400);
    expect(res.body).toMatchObject({ statusCode: 400, error: 'Bad Request', message: 'The request body is not valid JSON' });
  });

  it('400 for a JSON body that is not an object, saying so rather than that it is not JSON', async () => {
    for (const body of ['"ada"', 'null', '42']) {
      const res = await t.a.post('/v1/subscribers').set('Content-Type', 'application/json').send(body).expect(400);
      expect(res.body.message).toBe('The request body must be a JSON object, not a string, number, boolean or null');
    }
    await t.a.post('/v1/subscribers').set('Content-Type', 'application/json').send('[]').expect(400);
  });

  it('400 for a missing body, or a body in another content type, naming the type it came in', async () => {
    expect((await t.a.post('/v1/subscribers').expect(400)).body.details[0]).toEqual({
      field: 'body',
      message: 'is required: send a JSON body',
    });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/vnd.api+json']) {
      const res = await t.a.post('/v1/subscribers').set('Content-Type', type).send('{"subscriberId":"x"}').expect(400);
      expect(res.body).toMatchObject({
        message: `The request body must be sent as JSON (Content-Type: application/json), not ${type}`,
        details: [{ field: 'header/content-type', message: `must be application/json, not ${type}` }],
      });
    }
    await t.a.get('/v1/subscribers/x').expect(404);
    // An operation that takes no body ignores one, whatever its type.
    const { body } = await t.a.post('/v1/webhook-endpoints', { url: 'https://example.com/hook' }).expect(201);
    await t.a.post(`/v1/webhook-endpoints/${body.data.endpointId}/test`).set('Content-Type', 'text/plain').send('hello').expect(200);
  });

  it('400 naming the field for a schema mismatch', async () => {
    const res = await t.a.post('/v1/subscribers', { subscriberId: 42 }).expect(400);
    expect(res.body.message).toContain('body/subscriberId');
    expect(res.body.details).toEqual([{ field: 'body/subscriberId', message: 'must be string' }]);
  });

  it('400 for an Idempotency-Key over 255 characters', async () => {
    const res = await t.a.post('/v1/subscribers', { subscriberId: 'idem' }).set('Idempotency-Key', 'k'.repeat(256)).expect(400);
    expect(res.body.details[0].field).toBe('header/idempotency-key');
  });

  it('413 for a body over 1 MiB, before anything is stored', async () => {
    const big = { subscriberId: 'big', data: { blob: 'x'.repeat(1024 * 1024) } };
    const res = await t.a.post('/v1/subscribers', big).expect(413);
    expect(res.body).toMatchObject({ statusCode: 413, error: 'Payload Too Large', message: 'The request body is larger than 1 MiB' });
    await t.a.get('/v1/subscribers/big').expect(404);
  });

  it('accepts a body just under 1 MiB', async () => {
    const body = { subscriberId: 'almost-big', data: { blob: 'x'.repeat(1024 * 1024 - 100) } };
    await t.a.post('/v1/subscribers', body).expect(201);
  });

  it('413 for a body of more than 100,000 JSON values, before anything is stored; 100,000 are read', async () => {
    // The object, subscriberId's string, data's array: three values besides the items.
    const atLimit = { subscriberId: 'many-values', data: { items: Array(99_996).fill(0) } };
    await t.a.post('/v1/subscribers', atLimit).expect(201);
    const over = { subscriberId: 'too-many-values', data: { items: [...Array(99_996).fill(0), 0] } };
    const res = await t.a.post('/v1/subscribers', over).expect(413);
    expect(res.body).toMatchObject({
      statusCode: 413,
      error: 'Payload Too Large',
      message: 'The request body holds more than 100,000 JSON values (objects, arrays, strings, numbers, booleans and nulls; keys not counted)',
    });
    await t.a.get('/v1/subscribers/too-many-values').expect(404);
    // Keys are not values, and strings are one value however long.
    await t.a.post('/v1/subscribers', { subscriberId: 'long-values', data: { text: 'x,1,[],{}'.repeat(50_000) } }).expect(201);
  });

  it('413 for objects that use more than 20,000 distinct key names together; repeated names are not counted again', async () => {
    const named = (from: number, count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${from + i}`, 0]));
    // subscriberId, data, a and b are names too.
    await t.a.post('/v1/subscribers', { subscriberId: 'many-names', data: { a: named(0, 9_998), b: named(9_998, 9_998) } }).expect(201);
    const res = await t.a.post('/v1/subscribers', { subscriberId: 'too-many-names', data: { a: named(0, 9_998), b: named(9_998, 9_999) } }).expect(413);
    expect(res.body.message).toBe("The request body's objects use more than 20,000 distinct key names together");
    await t.a.get('/v1/subscribers/too-many-names').expect(404);
    const repeated = Array.from({ length: 300 }, () => named(0, 100));
    await t.a.post('/v1/subscribers', { subscriberId: 'repeated-names', data: { repeated } }).expect(201);
  });

  it('400 for a JSON body in another charset than UTF-8 (RFC 8259), UTF-16 included', async () => {
    const text = '{"subscriberId":"utf16"}';
    for (const [charset, bytes] of [['utf-16le', Buffer.from(text, 'utf16le')], ['latin1', Buffer.from(text, 'latin1')]] as const) {
      const res = await t.a.post('/v1/subscribers').set('Content-Type', `application/json; charset=${charset}`).serialize((body: unknown) => body as string).send(bytes).expect(400);
      expect(res.body).toMatchObject({ statusCode: 400, message: 'The request body must be encoded as UTF-8' });
    }
    await t.a.get('/v1/subscribers/utf16').expect(404);
    await t.a.post('/v1/subscribers').set('Content-Type', 'application/json; charset=UTF-8').send(text).expect(201);
  });

  it('answers at once a body of 500,000 values or of a megabyte of escapes, and refuses bytes that are not UTF-8 (a surrogate, an overlong NUL)', async () => {
    const started = performance.now();
    await t.a.post('/v1/subscribers', { subscriberId: 'many', data: { items: Array(500_000).fill(0) } }).expect(413);
    const escapes = `{"subscriberId":"escapes","data":{"text":"${'\\n'.repeat(500_000)}"}}`;
    await t.a.post('/v1/subscribers').set('Content-Type', 'application/json').send(escapes).expect(201);
    // A liveness bound with a wide margin: the scan of the escapes alone once took 2.5 s.
    expect(performance.now() - started).toBeLessThan(3_000);
    // Not UTF-8: refused, not stored as U+FFFD (what was never sent), nor decoded into a surrogate or NUL.
    for (const bytes of [[0xed, 0xa0, 0x80], [0xc0, 0x80], [0xff], [0xe2, 0x82]]) {
      const raw = Buffer.concat([Buffer.from('{"subscriberId":"raw","data":{"x":"a'), Buffer.from(bytes), Buffer.from('b"}}')]);
      const res = await t.a.post('/v1/subscribers').set('Content-Type', 'application/json').serialize((body: unknown) => body as string).send(raw).expect(400);
      expect(res.body).toMatchObject({ statusCode: 400, message: 'The request body must be encoded as UTF-8' });
    }
    await t.a.get('/v1/subscribers/raw').expect(404);
    // Every UTF-8 character is text, four bytes long too.
    await t.a.post('/v1/subscribers', { subscriberId: 'utf8', data: { x: 'é€😀' } }).expect(201);
    expect((await t.a.get('/v1/subscribers/utf8').expect(200)).body.data.data.x).toBe('é€😀');
  });

  it('400 naming the field for a body nested deeper than 64 levels, or holding NUL or half a surrogate pair, escaped anywhere', async () => {
    // Containers 64 deep (the body's own object the first) are stored; 65 are not.
    const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const post = (body: string) => t.a.post('/v1/subscribers').set('Content-Type', 'application/json').send(body);
    await post(`{"subscriberId":"deep-64","data":${nested(63)}}`).expect(201);
    expect(JSON.stringify((await t.a.get('/v1/subscribers/deep-64').expect(200)).body.data.data)).toBe(nested(63));
    const deep = await post(`{"subscriberId":"deep-65","data":${nested(64)}}`).expect(400);
    expect(deep.body.details).toEqual([{ field: `body/data${'/a'.repeat(63)}`, message: 'nests deeper than 64 levels' }]);
    const nul = await post('{"subscriberId":"nul","data":{"list":[1,{"k\\u0000":2}]}}').expect(400);
    expect(nul.body.details).toEqual([{ field: 'body/data/list/1', message: 'has a key that contains NUL or an unpaired UTF-16 surrogate' }]);
    const half = await post('{"subscriberId":"half","data":{"x":"\\ud83d"}}').expect(400);
    expect(half.body.details).toEqual([{ field: 'body/data/x', message: 'must not contain NUL or an unpaired UTF-16 surrogate' }]);
    await post('{"subscriberId":"pair","data":{"x":"\\ud83d\\ude00 \\\\u0000"}}').expect(201);
    expect((await t.a.get('/v1/subscribers/pair').expect(200)).body.data.data).toEqual({ x: '😀 \\u0000' });
  });

  it('400 naming the field for a number beyond what a double holds, not null stored in its place', async () => {
    const post = (body: string) => t.a.post('/v1/subscribers').set('Content-Type', 'application/json').send(body);
    for (const number of ['1e400', '-1E+999', '9'.repeat(400)]) {
      const res = await post(`{"subscriberId":"huge","data":{"list":[1,{"x":${number}}]}}`).expect(400);
      expect(res.body.details).toEqual([{ field: 'body/data/list/1/x', message: 'is a number beyond what a double holds (about ±1.8e308)' }]);
    }
    await t.a.get('/v1/subscribers/huge').expect(404);
    await post('{"subscriberId":"large","data":{"x":1.7e308,"y":1e-400,"z":-0}}').expect(201);
    expect((await t.a.get('/v1/subscribers/large').expect(200)).body.data.data).toEqual({ x: 1.7e308, y: 0, z: 0 });
  });

  it('500 with nothing internal in the body when the database fails', async () => {
    await t.db.schema.renameTable('subscribers', 'subscribers_gone');
    try {
      const res = await t.a.get('/v1/subscribers').expect(500);
      expect(res.body).toMatchObject({ statusCode: 500, error: 'Internal Server Error' });
      expect(res.body.message).toMatch(/request id [0-9a-f-]{36}$/);
      expect(res.body.message).toContain(res.headers['x-request-id']);
      expect(JSON.stringify(res.body)).not.toMatch(/subscribers_gone|sqlite|relation|select|stack|at /i);
    } finally {
      await t.db.schema.renameTable('subscribers_gone', 'subscribers');
    }
  });
});

describe('requests carry an id', () => {
  it('echoes a sane X-Request-Id, and makes one up otherwise', async () => {
    expect((await t.a.get('/v1/subscribers').set('X-Request-Id', 'abc-123')).headers['x-request-id']).toBe('abc-123');
    const made = (await t.a.get('/v1/subscribers').set('X-Request-Id', 'not a sane id!')).headers['x-request-id'];
    expect(made).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('the service endpoints need no key', () => {
  it('answers /health and /ready', async () => {
    expect((await t.http.get('/health').expect(200)).body).toEqual({ status: 'ok' });
    expect((await t.http.get('/ready').expect(200)).body).toEqual({ status: 'ready' });
  });

  it('serves the contract at /v1/openapi.yaml', async () => {
    const res = await t.http.get('/v1/openapi.yaml').expect(200).expect('Content-Type', /yaml/);
    expect(res.text).toContain('openapi: 3.1.0');
    // The bundle, not the split sources: one self-contained document, every $ref inside it.
    expect(res.text).toMatch(/\$ref: '#\//);
    expect(res.text).not.toMatch(/\$ref: '?[^'#\s]/);
  });
});
