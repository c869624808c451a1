// Hostile input, class by class (issue 24), against the app served on 127.0.0.1 and a real
// database: what a tenant can send (schemas, templates, ill-typed items) cannot freeze the process,
// fill the database, write into the server log or answer 5xx; /metrics is closed without its token;
// Node's own 4xx answers carry the error body. The SIGTERM drain is in test/e2e/shutdown.test.ts.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { countStatements } from '../helpers/queries.js';
import { compilesPosted } from '../helpers/thread-posts.js';
import { createIntegration, createSubscriber, createWorkflow, integrationBodies, step, uniqueId } from '../helpers/factories.js';
import fs from 'node:fs';
import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import path from 'node:path';
import express from 'express';
import supertest from 'supertest';
import { JobRunner } from '../../src/engine/runner.js';
import { findWorkflow, PARSED_ONCE_SCHEMA_CHARS } from '../../src/db/repos/workflows.js';
import { AS_FOR_ANOTHER } from '../../src/engine/in-app-batch.js';
import { createServer, type HeraldServer } from '../../src/http/server.js';
import { docsPage } from '../../src/http/docs.js';
import { CONTRACT_PATH } from '../../src/contract.js';
import { INBOX_EXAMPLE_DIR } from '../../src/http/examples.js';

const t = useTestApp();
beforeEach(() => t.clock.advance(60_000));

/** Triggers a workflow for a new subscriber, runs its jobs, and returns the notification with its jobs. */
async function deliverOnce(workflowId: string, payload: object, subscriber: object = {}, overrides?: object) {
  const subscriberId = uniqueId('hostile');
  await createSubscriber(t.a, { subscriberId, ...subscriber });
  const trigger = await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId, payload, overrides }).expect(201);
  await new JobRunner(t.deps).runUntilIdle();
  const [listed] = (await t.a.get(`/v1/notifications?transactionId=${trigger.body.data.transactionId}`).expect(200)).body.data;
  const notification = (await t.a.get(`/v1/notifications/${listed.notificationId}`).expect(200)).body.data;
  const feed = (await t.a.get(`/v1/subscribers/${subscriberId}/messages`).expect(200)).body.data as Array<{ content: string }>;
  return { notification, feed };
}

describe('work budgets: a payload schema cannot freeze the process', () => {
  it('matches a payloadSchema pattern in linear time: an overlapping alternation on a 40-character value answers at once', async () => {
    const payloadSchema = { type: 'object', properties: { name: { type: 'string', pattern: '^([a-z]|[a-z0-9])*$' } } };
    const { workflowId } = await createWorkflow(t.a, { payloadSchema });
    await createSubscriber(t.a, { subscriberId: 'regex-victim' });
    const started = performance.now();
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'regex-victim', payload: { name: `${'a'.repeat(40)}!` } });
    // A liveness bound with a wide margin (a loaded machine included): with backtracking this value takes hours.
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(res.status).toBe(422);
    expect(res.body.details).toEqual([{ field: 'body/payload/name', message: 'must match pattern "^([a-z]|[a-z0-9])*$"' }]);
    // The pattern still does its work.
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'regex-victim', payload: { name: 'a'.repeat(40) } }).expect(201);
  });

  it("bounds the patterns' work per request: a long value under many patterns is a 422 at once, before any is matched", async () => {
    // 200 patterns over 900,000 characters: unbounded, RE2 would take tens of seconds on this.
    const allOf = Array.from({ length: 200 }, (_, i) => ({ pattern: `^[a-z${i}]*$` }));
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { note: { type: 'string', allOf } } } });
    await createSubscriber(t.a, { subscriberId: 'pattern-victim' });
    const started = performance.now();
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'pattern-victim', payload: { note: 'a'.repeat(900_000) } });
    // A liveness bound with a wide margin.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(res.status).toBe(422);
    expect(res.body.details).toEqual([{ field: 'body/payload', message: expect.stringContaining('would need more than 262,144 characters checked by the payloadSchema') }]);
    // Within the budget the patterns do their work as before.
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'pattern-victim', payload: { note: 'a'.repeat(1_000) } }).expect(201);
  });

  it("charges formats to that budget as patterns: an allOf of 95 formats over a long value is a 422, not seconds of checking", async () => {
    for (const format of ['byte', 'uri', 'regex', 'email', 'date-time']) {
      const allOf = Array.from({ length: 95 }, () => ({ format }));
      const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { s: { type: 'string', allOf } } } });
      const subscriberId = uniqueId('format-victim');
      await createSubscriber(t.a, { subscriberId });
      const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId, payload: { s: 'QUFB'.repeat(1_000) } }).expect(422);
      expect(res.body.details, format).toEqual([{ field: 'body/payload', message: expect.stringContaining('characters checked by the payloadSchema\'s patterns and formats') }]);
    }
    // Within the budget a format does its work as before.
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { s: { type: 'string', format: 'email' } } } });
    await createSubscriber(t.a, { subscriberId: 'format-ok' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'format-ok', payload: { s: 'ada@example.com' } }).expect(201);
    const wrong = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'format-ok', payload: { s: 'not an address' } }).expect(422);
    expect(wrong.body.details).toEqual([{ field: 'body/payload/s', message: 'must match format "email"' }]);
  });

  it("shares one pattern budget between a bulk request's events: those past it are answered error", async () => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { note: { type: 'string', pattern: '^[a-z]*$' } } } });
    await createSubscriber(t.a, { subscriberId: 'bulk-victim' });
    const event = { name: workflowId, to: 'bulk-victim', payload: { note: 'a'.repeat(100_000) } };
    const res = await t.a.post('/v1/events/trigger/bulk', { events: [event, event, event] }).expect(201);
    expect(res.body.data.map((r: { status: string }) => r.status)).toEqual(['processed', 'processed', 'error']);
    expect(res.body.data[2].error).toEqual([expect.stringMatching(/^payload would need more than 262,144 characters checked/)]);
    // The next request has a budget of its own.
    await t.a.post('/v1/events/trigger', event).expect(201);
  });

  it('refuses, when the workflow is saved, a pattern that cannot match in linear time, naming the field', async () => {
    const payloadSchema = { type: 'object', patternProperties: { '^(?!x)': { type: 'string' } }, properties: { a: { type: 'string', pattern: '(a)\\1' } } };
    const res = await t.a.post('/v1/workflows', { name: 'Lookaround', payloadSchema, steps: [step.inApp()] }).expect(422);
    expect(res.body.details.map((d: { field: string }) => d.field).sort()).toEqual(['body/payloadSchema/patternProperties', 'body/payloadSchema/properties/a/pattern']);
    const { workflowId } = await createWorkflow(t.a);
    const put = await t.a.put(`/v1/workflows/${workflowId}`, { payloadSchema: { type: 'string', pattern: '(?<=a)b' } }).expect(422);
    expect(put.body.details[0].field).toBe('body/payloadSchema/pattern');
  });

  it('reads patterns only where they are schemas: a "pattern" inside a const or an enum is data, a property named const is a schema', async () => {
    const data = { pattern: '(a)\\1', patternProperties: { '(?=a)': 1 } };
    const payloadSchema = { type: 'object', properties: { kind: { const: data }, other: { enum: [data, 'plain'] } } };
    const { workflowId } = await createWorkflow(t.a, { payloadSchema });
    await createSubscriber(t.a, { subscriberId: 'const-pattern' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'const-pattern', payload: { kind: data, other: 'plain' } }).expect(201);
    const named = { type: 'object', properties: { const: { type: 'string', pattern: '(a)\\1' } } };
    const res = await t.a.post('/v1/workflows', { name: 'Named const', payloadSchema: named, steps: [step.inApp()] }).expect(422);
    expect(res.body).toMatchObject({ statusCode: 422, error: 'Unprocessable Entity' });
    expect(res.body.details).toEqual([{ field: 'body/payloadSchema/properties/const/pattern', message: expect.stringContaining('cannot be matched in linear time') }]);
  });

  it('parses a large stored payloadSchema once for all the triggers that read it, and its new text once it is saved again', async () => {
    const large = (n: number) => ({ type: 'object', properties: { kind: { const: Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, [i, i + 1]])) } } });
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: large(2_000) });
    const read = async () => (await findWorkflow(t.db, t.environments.a, workflowId))!.payloadSchema;
    const first = await read();
    expect(JSON.stringify(first).length).toBeGreaterThanOrEqual(PARSED_ONCE_SCHEMA_CHARS);
    expect(await read()).toBe(first);
    await t.a.put(`/v1/workflows/${workflowId}`, { payloadSchema: large(2_001) }).expect(200);
    const saved = await read();
    expect(saved).not.toBe(first);
    expect(saved).toEqual(large(2_001));
    expect(await read()).toBe(saved);
  });

  it("refuses at once, when the workflow is saved, patterns whose counted repetitions compile past the schema's bound", async () => {
    const many = 'a{1000}'.repeat(1_000);
    const started = performance.now();
    const res = await t.a.post('/v1/workflows', { name: 'Repeats', payloadSchema: { type: 'object', properties: { a: { type: 'string', pattern: many } } }, steps: [step.inApp()] }).expect(422);
    // A liveness bound with a wide margin: compiled, this 7 KB pattern took six seconds.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(res.body.details).toEqual([{ field: 'body/payloadSchema/properties/a/pattern', message: expect.stringContaining('past 100,000 instructions compiled') }]);
    // Counted together: two patterns of 60,000 each go over; one passes, and still does its work.
    const half = { type: 'string', pattern: `^${'a{1000}'.repeat(60)}$` };
    const two = await t.a.post('/v1/workflows', { name: 'Two', payloadSchema: { type: 'object', properties: { a: half, b: half } }, steps: [step.inApp()] }).expect(422);
    expect(two.body.details).toEqual([{ field: 'body/payloadSchema/properties/b/pattern', message: expect.stringContaining('past 100,000') }]);
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: half } } });
    await createSubscriber(t.a, { subscriberId: 'repeat-victim' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'repeat-victim', payload: { a: 'a'.repeat(60_000) } }).expect(201);
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'repeat-victim', payload: { a: 'a'.repeat(59_999) } }).expect(422);
  });

  it('answers 422, not 500, to a trigger of a workflow saved with such a pattern before it was refused', async () => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object' } });
    const stored = { type: 'object', properties: { a: { type: 'string', pattern: '(?=a)a' } } };
    await t.db('workflows').where({ workflow_id: workflowId, environment_id: t.environments.a }).update({ payload_schema: JSON.stringify(stored), updated_at: new Date().toISOString() });
    await createSubscriber(t.a, { subscriberId: 'old-schema' });
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'old-schema', payload: { a: 'a' } }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/name', message: expect.stringContaining("the workflow's payloadSchema cannot be used") }]);
    // The refusal is remembered for this version of the workflow, and ends when it is saved again.
    const again = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'old-schema', payload: { a: 'a' } }).expect(422);
    expect(again.body.details).toEqual(res.body.details);
    await t.a.put(`/v1/workflows/${workflowId}`, { payloadSchema: { type: 'object', properties: { a: { type: 'string', pattern: '^a$' } } } }).expect(200);
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'old-schema', payload: { a: 'a' } }).expect(201);
    // A large schema (checked on the payload check thread) is refused the same way, and remembered.
    const large = { type: 'object', properties: { ...Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`p${i}`, { type: 'string' }])), a: { type: 'string', pattern: '(?=a)a' } } };
    await t.db('workflows').where({ workflow_id: workflowId, environment_id: t.environments.a }).update({ payload_schema: JSON.stringify(large), updated_at: new Date(Date.now() + 1_000).toISOString() });
    for (let i = 0; i < 2; i++) {
      const refused = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'old-schema', payload: { a: 'a' } }).expect(422);
      expect(refused.body.details).toEqual([{ field: 'body/name', message: expect.stringContaining("the workflow's payloadSchema cannot be used (payloadSchema/properties/a/pattern cannot be matched in linear time") }]);
    }
  });
});

describe('the payload check thread dies', () => {
  afterEach(() => vi.restoreAllMocks());

  /** Kills the payload check thread, as a payload that ran it out of memory would, at each check whose payload holds `text`. */
  function killThreadOn(text: string) {
    const post = Worker.prototype.postMessage;
    return vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      const payload = typeof message === 'object' && message !== null && 'patternChars' in message ? (message as { payload?: string }).payload : undefined;
      if (payload?.includes(text)) {
        void this.terminate();
        return;
      }
      post.call(this, message);
    });
  }
  // 150 subschemas: compiled and checked on the thread.
  const large = { type: 'object', properties: { ...Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`p${i}`, { type: 'string' }])), a: { type: 'string', maxLength: 8 } } };

  it('answers the triggers it was checking, not a 500; one whose payload kills it each time is a 422 naming body/payload', async () => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: large });
    await createSubscriber(t.a, { subscriberId: 'thread-victim' });
    const trigger = (a: string) => t.a.post('/v1/events/trigger', { name: workflowId, to: 'thread-victim', payload: { a } });
    const killer = killThreadOn('kills');
    const [before, killing, after] = await Promise.all([trigger('ok'), trigger('kills'), trigger('too long here')]);
    expect(before.status).toBe(201);
    expect(killing.status).toBe(422);
    expect(killing.body.details).toEqual([{ field: 'body/payload', message: expect.stringContaining('could not be checked against the payloadSchema') }]);
    expect(after.status).toBe(422);
    expect(after.body.details).toEqual([{ field: 'body/payload/a', message: 'must NOT have more than 8 characters' }]);
    killer.mockRestore();
    // The thread is started again for the next trigger; the killing payload, sent again, is answered
    // at once, without stopping the thread twice more (a payload differing only in that word goes).
    await trigger('ok').expect(201);
    const again = await trigger('kills').expect(422);
    expect(again.body.details).toEqual(killing.body.details);
    await trigger('kill').expect(201);
  });
});

describe('work budgets: what a payload schema may hold', () => {
  /** `levels` schemas, each an anyOf of two refs to the next: 2^levels paths to the leaf. */
  const doubling = (levels: number) => {
    const $defs: Record<string, object> = { [`a${levels}`]: { type: 'string' } };
    for (let i = 0; i < levels; i++) $defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    return { type: 'object', $defs, properties: { v: { $ref: '#/$defs/a0' } } };
  };
  const refused = async (payloadSchema: object) => (await t.a.post('/v1/workflows', { name: 'Costly', payloadSchema, steps: [step.inApp()] }).expect(422)).body.details;

  it('refuses recursion, references that are not local pointers, and dynamic references, naming where', async () => {
    expect(await refused({ $ref: '#' })).toEqual([{ field: 'body/payloadSchema/$ref', message: expect.stringContaining('recursive payload schemas are not accepted') }]);
    expect(await refused({ anyOf: [{ $ref: '#' }, { type: 'string' }] })).toEqual([{ field: 'body/payloadSchema/anyOf/0/$ref', message: expect.stringContaining('recursive') }]);
    expect(await refused({ properties: { a: { $ref: 'https://example.com/s.json' } } })).toEqual([
      { field: 'body/payloadSchema/properties/a/$ref', message: 'must be a local JSON pointer to a schema of this one, such as #/$defs/name' },
    ]);
    expect((await refused({ $dynamicRef: '#node' }))[0].field).toBe('body/payloadSchema/$dynamicRef');
    // A `$ref` inside data (const, enum, default, examples) is data.
    await t.a.post('/v1/workflows', { name: 'Data', payloadSchema: { const: { $ref: '#' }, examples: [{ $ref: 'x' }] }, steps: [step.inApp()] }).expect(201);
  });

  it('walks properties named like data keywords as the schemas they are, and refuses broken pointers and inner $ids', async () => {
    expect(await refused({ properties: { default: { anyOf: [{ $ref: '#/properties/default' }] } } })).toEqual([
      { field: 'body/payloadSchema/properties/default/anyOf/0/$ref', message: expect.stringContaining('recursive') },
    ]);
    const $defs: Record<string, object> = { a22: { type: 'string' } };
    for (let i = 0; i < 22; i++) $defs[`a${i}`] = { anyOf: [{ $ref: `#/properties/enum/$defs/a${i + 1}` }, { $ref: `#/properties/enum/$defs/a${i + 1}` }] };
    expect(await refused({ properties: { enum: { $defs, $ref: '#/properties/enum/$defs/a0' } } })).toEqual([
      { field: 'body/payloadSchema', message: expect.stringContaining('expands to more than 1,000 schemas') },
    ]);
    expect(await refused({ properties: { const: { $ref: 'https://example.com/s.json' } } })).toEqual([
      { field: 'body/payloadSchema/properties/const/$ref', message: expect.stringContaining('local JSON pointer') },
    ]);
    expect(await refused({ properties: { a: { $ref: '#/%E0' } } })).toEqual([{ field: 'body/payloadSchema/properties/a/$ref', message: expect.stringContaining('local JSON pointer') }]);
    expect(await refused({ properties: { a: { $id: 'https://example.com/a', type: 'string' } } })).toEqual([
      { field: 'body/payloadSchema/properties/a/$id', message: 'is accepted only at the root of a payload schema' },
    ]);
  });

  it('looks a value up in a long enum rather than comparing it with every entry, and refuses an enum of many objects', async () => {
    await createSubscriber(t.a, { subscriberId: 'long-enum' });
    const entries = Array.from({ length: 50_000 }, (_, i) => i + 1);
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { type: 'array', items: { enum: entries } } } } });
    const started = performance.now();
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'long-enum', payload: { a: Array(60_000).fill(50_000) } }).expect(201);
    // A liveness bound with a wide margin: compared entry by entry, these 3·10⁹ comparisons took seconds.
    expect(performance.now() - started).toBeLessThan(2_000);
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'long-enum', payload: { a: [1, 0] } }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/payload/a/1', message: 'must be equal to one of the allowed values' }]);
    const objects = await t.a.post('/v1/workflows', { name: 'Objects', payloadSchema: { enum: Array.from({ length: 21 }, (_, i) => ({ i })) }, steps: [step.inApp()] }).expect(422);
    expect(objects.body.details[0].message).toContain('at most 20 objects or arrays');
    const few = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { enum: [{ x: [1, 2] }, 'plain'] } } } });
    await t.a.post('/v1/events/trigger', { name: few.workflowId, to: 'long-enum', payload: { a: { x: [1, 2] } } }).expect(201);
    await t.a.post('/v1/events/trigger', { name: few.workflowId, to: 'long-enum', payload: { a: { x: [2, 1] } } }).expect(422);
  });

  it('refuses a schema that expands past its bound once its refs are followed, and keeps one that does not', async () => {
    expect(await refused(doubling(20))).toEqual([{ field: 'body/payloadSchema', message: expect.stringContaining('expands to more than 1,000 schemas') }]);
    await t.a.post('/v1/workflows', { name: 'Small', payloadSchema: doubling(5), steps: [step.inApp()] }).expect(201);
  });

  // Tenant schemas compile without ajv's optimizing passes, whose cost grew faster than a wide oneOf:
  // the validator still decides alike.
  it('keeps a schema of several hundred oneOf branches, and checks payloads against it exactly', async () => {
    const branches = Array.from({ length: 300 }, (_, i) => ({ type: 'object', required: [`k${i}`] }));
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { oneOf: branches } } } });
    await createSubscriber(t.a, { subscriberId: 'wide-one-of' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'wide-one-of', payload: { a: { k299: true } } }).expect(201);
    const two = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'wide-one-of', payload: { a: { k0: 1, k7: 1 } } }).expect(422);
    expect(two.body.details).toContainEqual({ field: 'body/payload/a', message: 'must match exactly one schema in oneOf' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'wide-one-of', payload: { a: { other: 1 } } }).expect(422);
  });

  it('checks uniqueItems in linear time, whatever the items', async () => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } } });
    await createSubscriber(t.a, { subscriberId: 'unique-items' });
    const item = (i: number) => Object.fromEntries(Array.from({ length: 20 }, (_, k) => [`k${k}`, k === 0 ? i : k]));
    const started = performance.now();
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'unique-items', payload: { a: Array.from({ length: 4_500 }, (_, i) => item(i)) } }).expect(201);
    // A liveness bound with a wide margin: compared pairwise, these 10,000,000 pairs took seconds.
    expect(performance.now() - started).toBeLessThan(2_000);
    // Equal whatever the order of their keys, as JSON Schema says; 1 and 1.0 are one number.
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'unique-items', payload: { a: [{ x: 1, y: [1, { z: 2 }] }, 'b', { y: [1.0, { z: 2 }], x: 1 }] } }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/payload/a', message: 'must NOT have duplicate items' }]);
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'unique-items', payload: { a: [{ x: 1 }, { x: '1' }, [1], 1] } }).expect(201);
  });

  it('answers 422 at once, not 500 or a stall, to a trigger of a workflow whose schema was stored before these rules', async () => {
    await createSubscriber(t.a, { subscriberId: 'old-costly' });
    for (const stored of [{ $ref: '#' }, doubling(20), { properties: { a: { $dynamicRef: '#x' } } }]) {
      const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object' } });
      await t.db('workflows').where({ workflow_id: workflowId, environment_id: t.environments.a }).update({ payload_schema: JSON.stringify(stored), updated_at: new Date().toISOString() });
      const started = performance.now();
      const payload = { v: 1, a: Array.from({ length: 30_000 }, (_, i) => [i]) };
      const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'old-costly', payload }).expect(422);
      // A liveness bound with a wide margin: checked as stored, each would take seconds, or crash.
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(res.body.details).toEqual([{ field: 'body/name', message: expect.stringContaining("the workflow's payloadSchema cannot be used") }]);
    }
  });

  it('names at most 100 of the problems of a small payload, and the first of a large one', async () => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { tags: { type: 'array', items: { type: 'string' } } } } });
    await createSubscriber(t.a, { subscriberId: 'many-problems' });
    const small = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'many-problems', payload: { tags: Array(1_000).fill(1) } }).expect(422);
    expect(small.body.details).toHaveLength(100);
    expect(small.body.details[0]).toEqual({ field: 'body/payload/tags/0', message: 'must be string' });
    const large = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'many-problems', payload: { tags: ['ok', ...Array(50_000).fill(1)] } }).expect(422);
    expect(large.body.details).toEqual([{ field: 'body/payload/tags/1', message: 'must be string' }]);
  });

  it('stops at the first problem of a large payload, however wide the schema (every error of it filled the heap)', async () => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { type: 'array', items: { allOf: Array(400).fill({ type: 'string' }) } } } } });
    await createSubscriber(t.a, { subscriberId: 'wide-schema' });
    // 2,400 items under 400 schemas each: within the checks' budget, and past the values whose every error is listed.
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'wide-schema', payload: { a: Array(2_400).fill(0) } }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/payload/a/0', message: 'must be string' }]);
  });

  const overBudget = { field: 'body/payload', message: expect.stringContaining('would need more than 1,000,000 checks against the payloadSchema') };

  it.each([
    ['an anyOf of 990 branches', { anyOf: Array.from({ length: 990 }, (_, i) => ({ const: i })) }, 989],
    ['an allOf of 990 schemas', { allOf: Array(990).fill({ type: 'integer', minimum: 0 }) }, 1],
  ])("bounds the schemas a payload is checked against per request: %s over 20,000 items is a 422 at once, 500 items pass", async (_, items, value) => {
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { type: 'array', items } } } });
    await createSubscriber(t.a, { subscriberId: 'check-budget' });
    const started = performance.now();
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'check-budget', payload: { a: Array(20_000).fill(value) } }).expect(422);
    // A liveness bound with a wide margin: checked, these 19,800,000 schemas held the event loop for five seconds.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(res.body.details).toEqual([overBudget]);
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'check-budget', payload: { a: Array(500).fill(value) } }).expect(201);
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'check-budget', payload: { a: [...Array(499).fill(value), -1] } }).expect(422);
  });

  it("counts the schemas under $refs, nested objects and each property, and shares the budget between a bulk request's events", async () => {
    const payloadSchema = {
      type: 'object',
      $defs: { wide: { anyOf: Array.from({ length: 100 }, (_, i) => ({ const: i })) } },
      properties: { rows: { type: 'array', items: { type: 'object', additionalProperties: { $ref: '#/$defs/wide' } } } },
    };
    const { workflowId } = await createWorkflow(t.a, { payloadSchema });
    await createSubscriber(t.a, { subscriberId: 'ref-budget' });
    // 400 rows of 10 properties, each under 101 schemas: about 404,000 checks an event.
    const row = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, 99]));
    const event = { name: workflowId, to: 'ref-budget', payload: { rows: Array(400).fill(row) } };
    await t.a.post('/v1/events/trigger', event).expect(201);
    const res = await t.a.post('/v1/events/trigger/bulk', { events: [event, event, event] }).expect(201);
    expect(res.body.data.map((r: { status: string }) => r.status)).toEqual(['processed', 'processed', 'error']);
    expect(res.body.data[2].error).toEqual([expect.stringMatching(/^payload would need more than 1,000,000 checks/)]);
    const alone = await t.a.post('/v1/events/trigger', { ...event, payload: { rows: Array(1_000).fill(row) } }).expect(422);
    expect(alone.body.details).toEqual([overBudget]);
  });
});

describe('work budgets: step conditions', () => {
  it('checks a long in list against a long payload value once, not entry by entry', async () => {
    const conditions = [{ field: 'payload.a', operator: 'in', value: Array.from({ length: 5_000 }, (_, i) => i) }];
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({}, { conditions })] });
    const started = performance.now();
    const { notification } = await deliverOnce(workflowId, { a: 'x'.repeat(400_000) });
    // A liveness bound with a wide margin: stringifying the value for each of the 5,000 entries took over 5 s.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(notification.jobs[0].status).toBe('skipped');
    expect((await deliverOnce(workflowId, { a: 4_999 })).feed).toHaveLength(1);
  });

  it("refuses at save a condition's value longer than 65,536 characters as JSON, naming it", async () => {
    const list = (length: number) => [{ field: 'payload.a', operator: 'in', value: Array.from({ length }, (_, i) => String(i % 10).repeat(14)) }];
    // Each entry is 17 characters with its comma: 3,855 of them are 65,535 as JSON, one more is over.
    await createWorkflow(t.a, { steps: [step.inApp({}, { conditions: list(3_855) })] });
    const res = await t.a.post('/v1/workflows', { name: 'Long list', steps: [step.inApp({}), step.inApp({}, { conditions: list(40_000) })] }).expect(422);
    expect(res.body.details).toEqual([{ field: 'body/steps/1/conditions/0/value', message: "is 680,001 characters as JSON, more than the 65,536 a condition's value may be" }]);
    await t.a.post('/v1/workflows', { name: 'Long list', steps: [step.inApp({}, { conditions: list(3_856) })] }).expect(422);
  });
});

describe('work budgets: what a bulk request stores', () => {
  // Their events' jobs (renders of 600 KB templates) are not what these tests are about: a later
  // test's worker would run them all.
  afterEach(async () => t.db('jobs').where({ environment_id: t.environments.a }).delete());

  it('stores one copy of a large workflow for all the events of a request that trigger it', async () => {
    // 10 steps of 60,000 characters: about 600 KB a copy. Each event had stored its own: 40 events, 24 MB.
    const steps = Array.from({ length: 10 }, () => step.inApp({ content: 'x'.repeat(60_000) }));
    const { workflowId } = await createWorkflow(t.a, { steps });
    const subscriberId = uniqueId('bulk-copies');
    await createSubscriber(t.a, { subscriberId });
    const events = Array.from({ length: 40 }, () => ({ name: workflowId, to: subscriberId }));
    const res = await t.a.post('/v1/events/trigger/bulk', { events }).expect(201);
    expect(res.body.data.map((result: { status: string }) => result.status)).toEqual(events.map(() => 'processed'));
    // Another request names the same copy.
    await t.a.post('/v1/events/trigger/bulk', { events: events.slice(0, 1) }).expect(201);
    const stored = await t.db('events').where({ environment_id: t.environments.a, workflow_key: workflowId }).select('workflow', 'workflow_snapshot');
    expect(stored).toHaveLength(41);
    expect(stored.every((row) => row.workflow === '')).toBe(true);
    expect(new Set(stored.map((row) => row.workflow_snapshot)).size).toBe(1);
    const [copy] = await t.db('workflow_snapshots').where({ environment_id: t.environments.a, digest: stored[0].workflow_snapshot });
    expect(copy.body.length).toBeGreaterThan(600_000);
  });

  it('sends that copy to the database once for a request, with an Idempotency-Key (one transaction) too', async () => {
    const steps = Array.from({ length: 10 }, () => step.inApp({ content: 'y'.repeat(60_000) }));
    const subscriberId = uniqueId('keyed-copies');
    await createSubscriber(t.a, { subscriberId });
    for (const keyed of [false, true]) {
      const { workflowId } = await createWorkflow(t.a, { steps: [...steps, step.inApp({ content: String(keyed) })] });
      const events = Array.from({ length: 40 }, () => ({ name: workflowId, to: subscriberId }));
      const request = t.a.post('/v1/events/trigger/bulk', { events });
      if (keyed) request.set('Idempotency-Key', uniqueId('copies'));
      const writes = await countStatements(t.db, /^INSERT INTO "?workflow_snapshots"?/, async () => expect((await request.expect(201)).body.data).toHaveLength(40));
      expect(writes).toBe(1);
    }
  });
});

describe('work budgets: rendering', () => {
  it('fails the job of a template whose loops go over budget, with a clear detail and no message stored', async () => {
    const items = Array.from({ length: 200 }, (_, i) => i);
    const content = '{{#each payload.items}}{{#each ../payload.items}}{{#each ../../payload.items}}{{this}}{{/each}}{{/each}}{{/each}}';
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content })] });
    const started = performance.now();
    const { notification, feed } = await deliverOnce(workflowId, { items });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(notification.status).toBe('failed');
    expect(notification.jobs).toMatchObject([{ type: 'in_app', status: 'failed', executionDetails: [{ status: 'failed', detail: expect.stringMatching(/loops ran more than 100,000 times|took more than/) }] }]);
    expect(feed).toEqual([]);
  });

  it('fails the job of a template that renders more than the size cap of a message', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: '{{#each payload.items}}{{../payload.big}}{{/each}}' })] });
    const { notification, feed } = await deliverOnce(workflowId, { items: Array.from({ length: 100 }, () => 1), big: 'x'.repeat(10_000) });
    expect(notification.jobs[0]).toMatchObject({ status: 'failed', executionDetails: [{ status: 'failed', detail: expect.stringContaining('more than 262,144 characters') }] });
    expect(feed).toEqual([]);
  });

  it("fails the job of an in-app message whose fields render more than a message's cap together, each under a field's", async () => {
    // Ten data entries of 200,000 characters each: every field is under its cap, the message is 2 MB.
    const data = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`d${i}`, '{{payload.big}}']));
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'Hello', data })] });
    const { notification, feed } = await deliverOnce(workflowId, { big: 'x'.repeat(200_000) });
    expect(notification.jobs[0]).toMatchObject({
      status: 'failed',
      executionDetails: [{ status: 'failed', detail: expect.stringContaining("The message's fields render more than 1,048,576 characters together") }],
    });
    expect(feed).toEqual([]);
  });

  it('fails, without building it, a template that repeats a large payload value outside any loop', async () => {
    // 1,000 copies of 600,000 characters would pass the longest string V8 can make: the output is
    // counted as it is written, so the render stops at the first copy over the cap.
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: '{{big}}'.repeat(1_000) })] });
    const started = performance.now();
    const { notification, feed } = await deliverOnce(workflowId, { big: 'x'.repeat(600_000) });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(notification.jobs[0]).toMatchObject({ status: 'failed', executionDetails: [{ status: 'failed', detail: expect.stringContaining('more than 262,144 characters') }] });
    expect(feed).toEqual([]);
  });

  it('fails a single (non in-app) job over budget at once, without retries', async () => {
    const subject = '{{#each payload.items}}{{#each ../payload.items}}{{#each ../../payload.items}}x{{/each}}{{/each}}{{/each}}';
    const { workflowId } = await createWorkflow(t.a, { steps: [step.email({ subject })] });
    await createIntegration(t.a, integrationBodies.sendgrid);
    const { notification } = await deliverOnce(workflowId, { items: Array.from({ length: 200 }, (_, i) => i) }, { email: 'ada@example.com' });
    expect(notification.jobs).toMatchObject([{ type: 'email', status: 'failed', executionDetails: [{ status: 'failed', detail: expect.stringMatching(/loops ran more than 100,000 times|took more than/) }] }]);
  });

  it("counts a message's fields together against its budget", async () => {
    // 55,460 iterations a field: each alone is within the 100,000 of a message, the two together are not
    // (on a loaded machine the 50 ms of a message may run out first: the same budget, shared).
    const square = '{{#each payload.items}}{{#each ../payload.items}}{{/each}}{{/each}}';
    const { workflowId } = await createWorkflow(t.a, { steps: [step.email({ subject: square, content: square })] });
    await createIntegration(t.a, integrationBodies.sendgrid);
    const { notification } = await deliverOnce(workflowId, { items: Array.from({ length: 235 }, (_, i) => i) }, { email: 'ada@example.com' });
    expect(notification.jobs).toMatchObject([{ status: 'failed', executionDetails: [{ status: 'failed', detail: expect.stringMatching(/loops ran more than 100,000 times|took more than 50 ms/) }] }]);
  });

  it("fails a batch's other recipients of a template over budget without rendering it again", async () => {
    const subject = '{{#each payload.items}}{{#each ../payload.items}}{{#each ../../payload.items}}x{{/each}}{{/each}}{{/each}}';
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: subject })] });
    const to = Array.from({ length: 40 }, () => uniqueId('batch'));
    for (const subscriberId of to) await createSubscriber(t.a, { subscriberId });
    const trigger = await t.a.post('/v1/events/trigger', { name: workflowId, to, payload: { items: Array.from({ length: 200 }, (_, i) => i) } }).expect(201);
    await new JobRunner(t.deps).runUntilIdle();
    const listed = (await t.a.get(`/v1/notifications?transactionId=${trigger.body.data.transactionId}&limit=100`).expect(200)).body.data as Array<{ notificationId: string }>;
    const details: string[] = [];
    for (const { notificationId } of listed) {
      const { jobs } = (await t.a.get(`/v1/notifications/${notificationId}`).expect(200)).body.data;
      expect(jobs).toMatchObject([{ status: 'failed' }]);
      details.push(jobs[0].executionDetails.at(-1).detail);
    }
    const rendered = details.filter((detail) => !detail.endsWith(AS_FOR_ANOTHER));
    expect(rendered).toEqual([expect.stringMatching(/loops ran more than 100,000 times|took more than 50 ms/)]);
    expect(details).toHaveLength(40);
  });

  it('renders what stays within budget as before', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: '{{#each payload.items}}{{@index}}:{{this}} {{/each}}{{#payload.items}}.{{/payload.items}}' })] });
    const { feed } = await deliverOnce(workflowId, { items: ['a', 'b'] });
    expect(feed.map((m) => m.content)).toEqual(['0:a 1:b ..']);
  });
});

describe('work budgets: compiling templates', () => {
  it('refuses at once, when the workflow is saved, templates with more {{…}} expressions than it compiles', async () => {
    // 50,000 expressions: compiling them all would hold the request (and every other) for seconds.
    const started = performance.now();
    const res = await t.a.post('/v1/workflows', { name: 'Many expressions', steps: [step.email({ content: '{{a}}'.repeat(50_000) })] }).expect(422);
    // Compiling them would take 8–12 s; refusing them takes milliseconds, under load too.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(res.body.details).toEqual([{ field: 'body/steps/0/template/content', message: expect.stringContaining('more than 1,000 {{…}} expressions') }]);
  });

  it('refuses at once templates whose expressions nest or hold more than Handlebars parses quickly', async () => {
    const nested = (n: number) => `{{lookup ${'(lookup '.repeat(n)}a${' b)'.repeat(n)} b}}`;
    const cases = {
      // Parsed, each of these took seconds or overflowed the stack.
      [nested(500)]: 'nests sub-expressions (…) 500 deep, more than the 16 a template may',
      // Read as Handlebars reads them: a quote or }} inside a [segment], a spaced else, an inverse section.
      [`{{[x"]}}${nested(1_200)}{{["]}}`]: 'nests sub-expressions (…) 1200 deep, more than the 16 a template may',
      [`{{a [}}] ${'(a '.repeat(1_200)}b${')'.repeat(1_200)} }}`]: 'nests sub-expressions (…) 1200 deep, more than the 16 a template may',
      [`{{#if a}}x${'{{ else if a}}x'.repeat(900)}{{/if}}`]: 'nests blocks {{#…}} (or chains {{else …}}) 901 deep, more than the 32 a template may',
      [`${'{{^a}}'.repeat(400)}x${'{{/a}}'.repeat(400)}`]: 'nests blocks {{#…}} (or chains {{else …}}) 400 deep, more than the 32 a template may',
      [`{{lookup ${'a '.repeat(100_000)}}}`]: 'has 3,001 names, literals and parameters inside its {{…}}, more than the 3,000 a template may have',
      [`{{${'a.'.repeat(100_000)}b}}`]: 'has 3,001 names, literals and parameters inside its {{…}}, more than the 3,000 a template may have',
      [`${'{{#if a}}'.repeat(400)}x${'{{/if}}'.repeat(400)}`]: 'nests blocks {{#…}} (or chains {{else …}}) 400 deep, more than the 32 a template may',
      // Handlebars nests each `else if` inside the branch before it.
      [`{{#if a}}x${'{{else if a}}x'.repeat(900)}{{/if}}`]: 'nests blocks {{#…}} (or chains {{else …}}) 901 deep, more than the 32 a template may',
    };
    for (const [content, message] of Object.entries(cases)) {
      const started = performance.now();
      const res = await t.a.post('/v1/workflows', { name: 'Deep', steps: [step.email({ content })] }).expect(422);
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(res.body.details).toEqual([{ field: 'body/steps/0/template/content', message: `does not compile: ${message}` }]);
    }
    // Up to the bounds, templates are as before; a comment is not counted.
    const comment = `{{!-- ${'('.repeat(40)} ${'word '.repeat(4_000)} --}}`;
    await createWorkflow(t.a, { steps: [step.inApp({ content: `${nested(16)} ${'{{#if a}}'.repeat(32)}x${'{{/if}}'.repeat(32)}${comment}{{#if a}}x{{else if b}}y{{else}}z{{/if}}` })] });
  });

  it('fails, without parsing it, the job of a trigger whose overrides nest too deep', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'fine' })] });
    const { notification } = await deliverOnce(workflowId, {}, {}, { in_app: { content: `{{lookup ${'(lookup '.repeat(500)}a b${' b)'.repeat(500)} b}}` } });
    expect(notification.jobs).toMatchObject([
      { status: 'failed', executionDetails: [{ status: 'failed', detail: 'The template nests sub-expressions (…) 500 deep, more than the 16 a template may' }] },
    ]);
  });

  it("counts the workflow's templates together, naming the one that goes over", async () => {
    const steps = [step.inApp({ content: '{{a}}'.repeat(600) }), step.chat({ content: '{{b}}'.repeat(600) })];
    const res = await t.a.post('/v1/workflows', { name: 'Two halves', steps }).expect(422);
    expect(res.body.details.map((d: { field: string }) => d.field)).toEqual(['body/steps/1/template/content']);
    await t.a.post('/v1/workflows', { name: 'One half', steps: steps.slice(0, 1) }).expect(201);
  });

  it("counts the names, literals and parameters of the workflow's templates together, naming the one that goes over", async () => {
    // 3,000 each, as many as one template may have: 170 such templates (a megabyte) took seconds to compile.
    const full = `{{log ${'a '.repeat(2_999)}}}`;
    const steps = [step.email({ content: full }), step.email({ content: full })];
    const res = await t.a.post('/v1/workflows', { name: 'Two full templates', steps }).expect(422);
    const message = "brings the workflow's templates to more than 5,000 names, literals and parameters inside their {{…}}, the most they may have together";
    expect(res.body).toMatchObject({ statusCode: 422, error: 'Unprocessable Entity', message: `body/steps/1/template/content ${message}` });
    expect(res.body.details).toEqual([{ field: 'body/steps/1/template/content', message }]);
    await t.a.post('/v1/workflows', { name: 'One full template', steps: steps.slice(0, 1) }).expect(201);
  });

  it("compiles a workflow's long expressions on the payload check thread, and its few short ones where it is saved", async () => {
    const posted = vi.spyOn(Worker.prototype, 'postMessage');
    const templatesPosted = () => posted.mock.calls.flatMap(([message]) => ((message as { templates?: unknown })?.templates as Array<{ field: string }>) ?? []);
    try {
      const many = '<p>{{payload.name}}</p>'.repeat(100);
      await createWorkflow(t.a, { steps: [step.inApp({ content: 'Hi {{payload.name}}' }), step.email({ subject: 'Hello', content: many })] });
      expect(templatesPosted().map(({ field }) => field)).toEqual(['body/steps/0/template/content', 'body/steps/1/template/subject', 'body/steps/1/template/content']);
      // What the thread finds is answered as it would be on the event loop.
      const res = await t.a.post('/v1/workflows', { name: 'Unclosed', steps: [step.email({ content: `${many}{{#if a}}` })] }).expect(422);
      expect(res.body.details).toEqual([{ field: 'body/steps/0/template/content', message: expect.stringMatching(/^does not compile: .*if/) }]);
      posted.mockClear();
      await createWorkflow(t.a, { steps: [step.inApp({ content: 'Hi {{payload.name}}' })] });
      expect(templatesPosted()).toEqual([]);
    } finally {
      posted.mockRestore();
    }
  });

  it("refuses a trigger whose overrides hold more {{…}} expressions than a workflow may, in one template or in many together", async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'fine' })] });
    const subscriberId = uniqueId('override');
    await createSubscriber(t.a, { subscriberId });
    const problem = (n: string) => ({ field: 'body/overrides', message: `hold ${n} {{…}} expressions together, more than the 1,000 a trigger's overrides may` });
    const one = await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId, overrides: { in_app: { content: '{{a}}'.repeat(1_001) } } }).expect(422);
    expect(one.body.details).toEqual([problem('1,001')]);
    // Each of these compiles alone; sixty of them compiled in one job held the event loop for seconds.
    const many = { in_app: { subject: '{{a}}'.repeat(400), data: { x: '{{b}}'.repeat(400) } }, email: { subject: '{{c}}'.repeat(201) } };
    const together = await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId, overrides: many }).expect(422);
    expect(together.body.details).toEqual([problem('1,001')]);
    const bulk = await t.a.post('/v1/events/trigger/bulk', { events: [{ name: workflowId, to: subscriberId, overrides: many }] }).expect(201);
    expect(bulk.body.data[0]).toMatchObject({ status: 'error' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId, overrides: { in_app: { subject: '{{a}}'.repeat(500), content: '{{b}}'.repeat(500) } } }).expect(201);
  });

  it('fails, without compiling them, the job of an event stored with overrides over that budget before it was checked', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'fine' })] });
    const subscriberId = uniqueId('override');
    await createSubscriber(t.a, { subscriberId });
    const trigger = await t.a.post('/v1/events/trigger', { name: workflowId, to: subscriberId }).expect(201);
    const { transactionId } = trigger.body.data;
    const stored = { in_app: Object.fromEntries(Array.from({ length: 3 }, (_, i) => [i === 0 ? 'content' : `subject${i}`, '{{a}}'.repeat(400)])) };
    await t.db('events').where({ transaction_id: transactionId }).update({ overrides: JSON.stringify(stored) });
    await new JobRunner(t.deps).runUntilIdle();
    const [listed] = (await t.a.get(`/v1/notifications?transactionId=${transactionId}`).expect(200)).body.data;
    const notification = (await t.a.get(`/v1/notifications/${listed.notificationId}`).expect(200)).body.data;
    expect(notification.jobs).toMatchObject([
      { status: 'failed', executionDetails: [{ status: 'failed', detail: "The trigger's in_app overrides hold 1,200 {{…}} expressions together, more than the 1,000 a trigger's overrides may" }] },
    ]);
  });

  it("compiles a job's costly new templates (a trigger's overrides) on the payload check thread before it renders them, and few short ones where it renders", async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'Hi {{payload.name}}' })] });
    const costly = `${'<p>{{payload.name}}</p>'.repeat(100)}{{#each payload.items}}[{{this}}]{{/each}}`;
    let delivered: Awaited<ReturnType<typeof deliverOnce>> | undefined;
    const posted = await compilesPosted(async () => {
      delivered = await deliverOnce(workflowId, { name: 'Ada & <Bob>', items: [1, 2] }, {}, { in_app: { content: costly, subject: 'Costly, for {{payload.name}}' } });
    });
    expect(posted).toEqual([
      { source: 'Costly, for {{payload.name}}', escape: false },
      { source: costly, escape: false },
    ]);
    expect(delivered!.feed.map((m) => m.content)).toEqual([`${'<p>Ada & <Bob></p>'.repeat(100)}[1][2]`]);
    // Compiled once: the next recipient's job finds it compiled; a workflow's few short templates never go.
    expect(await compilesPosted(() => deliverOnce(workflowId, { name: 'Cy' }, {}, { in_app: { content: costly } }))).toEqual([]);
    expect(await compilesPosted(() => deliverOnce(workflowId, { name: 'Dee' }, {}, { in_app: { content: 'Bye {{payload.name}}' } }))).toEqual([]);
  });

  it('holds a template compiled on the payload check thread to the output budget', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'fine' })] });
    const content = `{{payload.big}}${'<p>{{payload.name}}</p>'.repeat(100)}{{payload.big}}{{payload.big}}`;
    const posted = await compilesPosted(async () => {
      const { notification, feed } = await deliverOnce(workflowId, { big: 'x'.repeat(100_000), name: 'Ada' }, {}, { in_app: { content } });
      expect(notification.jobs[0]).toMatchObject({ status: 'failed', executionDetails: [{ status: 'failed', detail: expect.stringContaining('more than 262,144 characters') }] });
      expect(feed).toEqual([]);
    });
    expect(posted).toEqual([{ source: content, escape: false }]);
  });

  it('fails as undeliverable, with why, the job whose new templates stop the payload check thread twice', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'fine' })] });
    const post = Worker.prototype.postMessage;
    // As templates that ran the thread out of memory would: each time it is asked to compile them, it dies.
    const killer = vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      const compile = (message as { compile?: Array<{ source: string }> } | null)?.compile;
      if (compile?.some(({ source }) => source.includes('kills'))) {
        void this.terminate();
        return;
      }
      post.call(this, message);
    });
    try {
      const content = `kills ${'<p>{{payload.name}}</p>'.repeat(100)}`;
      const { notification, feed } = await deliverOnce(workflowId, { name: 'Ada' }, {}, { in_app: { content } });
      expect(notification.status).toBe('failed');
      expect(notification.jobs).toMatchObject([
        { status: 'failed', attempts: 1, executionDetails: [{ status: 'failed', detail: expect.stringMatching(/^The step's templates could not be compiled: .*twice/) }] },
      ]);
      expect(feed).toEqual([]);
      // The thread is started again for the next job.
      const next = await deliverOnce(workflowId, { name: 'Ada' }, {}, { in_app: { content: `lives ${'<p>{{payload.name}}</p>'.repeat(100)}` } });
      expect(next.feed.map((m) => m.content)).toEqual([`lives ${'<p>Ada</p>'.repeat(100)}`]);
    } finally {
      killer.mockRestore();
    }
  });

  it("refuses a trigger whose overrides put something other than text where a template goes", async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.email()] });
    await createSubscriber(t.a, { subscriberId: 'odd-overrides' });
    const syntaxTree = { type: 'Program', body: [], strip: {} };
    for (const content of [['{{a}}'], null, 5, syntaxTree]) {
      const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'odd-overrides', overrides: { email: { content } } }).expect(400);
      expect(res.body.details).toContainEqual({ field: 'body/overrides/email/content', message: 'must be string' });
    }
    const action = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'odd-overrides', overrides: { in_app: { primaryAction: { label: 7 } } } }).expect(400);
    expect(action.body.details).toContainEqual({ field: 'body/overrides/in_app/primaryAction/label', message: 'must be string' });
    // A provider's own settings stay open.
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'odd-overrides', overrides: { email: { subject: 'Urgent', cc: ['a@example.com'] }, sendgrid: { ipPool: 'x' } } }).expect(201);
  });
});

describe('templates reach only their data', () => {
  const spies: Array<ReturnType<typeof vi.spyOn>> = [];
  beforeAll(() => {
    for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) spies.push(vi.spyOn(console, method));
    spies.push(vi.spyOn(process.stdout, 'write'), vi.spyOn(process.stderr, 'write'));
  });
  afterEach(() => spies.forEach((spy) => spy.mockClear()));
  afterAll(() => spies.forEach((spy) => spy.mockRestore()));

  it('{{log}} renders nothing and writes no log line', async () => {
    const forged = '{"level":60,"msg":"forged fatal line"}';
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: 'before{{log payload.line level="error"}}{{log "x"}}after' })] });
    const { feed } = await deliverOnce(workflowId, { line: forged });
    expect(feed.map((m) => m.content)).toEqual(['beforeafter']);
    const written = spies.flatMap((spy) => (spy.mock.calls as unknown[][]).map((call) => String(call[0])));
    expect(written.filter((line) => line.includes('forged fatal line'))).toEqual([]);
  });

  it("writes nothing of a payloadSchema's unknown format to the log, and leaves it unchecked, as JSON Schema says", async () => {
    const format = 'zz"\n{"level":60,"time":1,"msg":"forged schema line"}\n';
    const { workflowId } = await createWorkflow(t.a, { payloadSchema: { type: 'object', properties: { a: { type: 'string', format } } } });
    await createSubscriber(t.a, { subscriberId: 'format-victim' });
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'format-victim', payload: { a: 'anything' } }).expect(201);
    const written = spies.flatMap((spy) => (spy.mock.calls as unknown[][]).map((call) => String(call[0])));
    expect(written.filter((line) => line.includes('forged schema line'))).toEqual([]);
  });

  it("counts a payload's own properties only: required toString or constructor is not met by an empty object", async () => {
    const payloadSchema = { type: 'object', required: ['toString', 'constructor'], properties: { constructor: { type: 'string' } } };
    const { workflowId } = await createWorkflow(t.a, { payloadSchema });
    await createSubscriber(t.a, { subscriberId: 'own-properties' });
    const res = await t.a.post('/v1/events/trigger', { name: workflowId, to: 'own-properties', payload: {} }).expect(422);
    expect(res.body.details).toEqual([
      { field: 'body/payload/toString', message: 'is required' },
      { field: 'body/payload/constructor', message: 'is required' },
    ]);
    await t.a.post('/v1/events/trigger', { name: workflowId, to: 'own-properties', payload: { toString: 1, constructor: 'c' } }).expect(201);
  });

  it('cannot reach prototypes or constructors', async () => {
    const { workflowId } = await createWorkflow(t.a, { steps: [step.inApp({ content: '[{{payload.constructor.name}}][{{lookup payload "__proto__"}}][{{payload.toString}}]' })] });
    const { feed } = await deliverOnce(workflowId, {});
    expect(feed.map((m) => m.content)).toEqual(['[][][]']);
  });
});

describe('no 5xx from ill-typed items', () => {
  const EVERY_TYPE = [null, 0, 1.5, '', 'in_app', true, [], [{ type: 'in_app' }], {}];
  it.each(EVERY_TYPE.map((item) => [JSON.stringify(item), item]))('a workflow step that is %s is a 400 with the error body, on create and update', async (_name, item) => {
    const created = await t.a.post('/v1/workflows', { name: 'Ill-typed', steps: [step.inApp(), item] }).expect(400);
    expect(created.body).toMatchObject({ statusCode: 400, error: 'Bad Request', details: [expect.objectContaining({ field: expect.stringMatching(/^body\/steps\/1/) })] });
    const { workflowId } = await createWorkflow(t.a);
    const updated = await t.a.put(`/v1/workflows/${workflowId}`, { steps: [item] }).expect(400);
    expect(updated.body.statusCode).toBe(400);
  });
});

describe('no 5xx from many ill-typed items', () => {
  it('lists the problems of a small body, and answers a large one with its first problem at once', async () => {
    const small = await t.a.post('/v1/events/trigger', { name: 'x', to: [{}, {}] }).expect(400);
    expect(small.body.details).toEqual(expect.arrayContaining([{ field: 'body/to/0/subscriberId', message: 'is required' }, { field: 'body/to/1/subscriberId', message: 'is required' }]));
    const started = performance.now();
    const large = await t.a.post('/v1/events/trigger', { name: 'x', to: Array.from({ length: 99_000 }, () => ({})) }).expect(400);
    // A liveness bound with a wide margin: with every error of every item collected, 300,000 of them held the event loop for 10 s.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(large.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(large.body.details).toContainEqual({ field: 'body/to', message: 'must NOT have more than 100 items' });
    expect(large.body.details.length).toBeLessThan(5);
  });

  it('answers a 400 with a short error body to a body whose every one of 99,000 items is ill-typed', async () => {
    await t.a.post('/v1/topics', { topicKey: 'many', name: 'Many' }).expect(201);
    // Numbers where strings go, one validation error each, as many as the body's 100,000 values let in.
    const res = await t.a.post('/v1/topics/many/subscribers', { subscribers: Array(99_000).fill(1) }).expect(400);
    expect(res.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(JSON.stringify(res.body).length).toBeLessThan(20_000);
  });
});

describe("Node's own answers and headers", () => {
  let served: HeraldServer;
  let port: number;
  beforeAll(async () => {
    served = createServer(t.app);
    await new Promise<void>((resolve) => served.server.listen(0, '127.0.0.1', resolve));
    port = (served.server.address() as AddressInfo).port;
  });
  afterAll(async () => served?.drain(0));

  /** Writes bytes on a new connection and reads everything the server sends back until it closes. */
  function rawExchange(bytes: string): Promise<{ status: number; headers: string; body: string }> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
      let text = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('error', reject);
      socket.on('close', () => {
        const [head, body = ''] = text.split('\r\n\r\n');
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), headers: head.toLowerCase(), body });
      });
    });
  }

  it('answers a malformed request line with 400 and the error body', async () => {
    const res = await rawExchange('GET /v1/subscribers HTTP/1.1 extra\r\nHost: x\r\n\r\n');
    expect(res.status).toBe(400);
    expect(res.headers).toContain('content-type: application/json');
    expect(res.headers).toContain('x-content-type-options: nosniff');
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 400, error: 'Bad Request', message: 'The request is not valid HTTP' });
  });

  it('answers 400 to a request that sends Authorization, Content-Type, Host or Idempotency-Key twice, running nothing', async () => {
    await t.a.post('/v1/subscribers', { subscriberId: 'twice' }).expect(201);
    await t.a.post('/v1/workflows', { workflowId: 'twice', name: 'Twice', steps: [{ type: 'in_app', template: { content: 'x' } }] }).expect(201);
    const body = JSON.stringify({ name: 'twice', to: 'twice' });
    const trigger = (headers: string) =>
      rawExchange(`POST /v1/events/trigger HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    const auth = `Authorization: ApiKey ${t.a.key}\r\n`;
    const json = 'Content-Type: application/json\r\n';
    for (const [headers, name] of [
      // Before: joined into the key "k1, k2", a key never sent, so a retry ran the trigger again.
      [`${auth}${json}Idempotency-Key: k1\r\nIdempotency-Key: k2\r\n`, 'Idempotency-Key'],
      [`${auth}Authorization: ApiKey hk_other\r\n${json}`, 'Authorization'],
      [`${auth}${json}Content-Type: text/plain\r\n`, 'Content-Type'],
      [`Host: y\r\n${auth}${json}`, 'Host'],
    ] as const) {
      const res = await trigger(headers);
      expect(res.status, name).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ statusCode: 400, message: `The request sends ${name} more than once; send it once`, path: '/v1/events/trigger' });
    }
    expect((await t.a.get('/v1/notifications?subscriberId=twice').expect(200)).body.totalCount).toBe(0);
    // Each once, and a header other than these (Accept) twice: run.
    expect((await trigger(`${auth}${json}Idempotency-Key: k1\r\nAccept: application/json\r\nAccept: */*\r\n`)).status).toBe(201);
  });

  it('answers headers over the limit with 431 and the error body, naming the path', async () => {
    const res = await rawExchange(`GET /v1/subscribers?limit=5 HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(res.status).toBe(431);
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 431, error: 'Request Header Fields Too Large', message: 'The request headers are too large', path: '/v1/subscribers' });
  });

  it('answers a request without Host, an unknown Expect and CONNECT with the error body', async () => {
    const cases = [
      ['GET /v1/subscribers HTTP/1.1\r\n\r\n', 400, 'An HTTP/1.1 request must send a Host header'],
      ['GET /v1/subscribers HTTP/1.1\r\nHost: x\r\nExpect: fancy\r\n\r\n', 417, 'Expect: fancy is not supported (only 100-continue is)'],
      ['CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n', 405, 'CONNECT is not allowed: Herald is not a proxy'],
    ] as const;
    for (const [bytes, status, message] of cases) {
      const res = await rawExchange(bytes);
      expect(res.status, bytes).toBe(status);
      expect(res.headers).toContain('content-type: application/json');
      expect(JSON.parse(res.body)).toMatchObject({ statusCode: status, message });
    }
    // HTTP/1.0 needs no Host.
    expect((await rawExchange('GET /health HTTP/1.0\r\n\r\n')).status).toBe(200);
  });

  /**
   * Sends `head`, then body bytes (from `chunk`, up to `most` bytes) for as long as the connection
   * takes them, and reads the first answer. Resolves once the server has closed the connection or
   * the bytes run out, saying how much was written, whether the answer came before the writing
   * ended, and the answer.
   */
  function sendUntilClosed(head: string, chunk: Buffer, most: number) {
    return new Promise<{ written: number; answeredWhileSending: boolean; closedByServer: boolean; status: number; body: string }>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      let written = 0;
      let text = '';
      let answeredWhileSending = false;
      let sending = true;
      let closedByServer = false;
      socket.setEncoding('latin1');
      socket.on('data', (data: string) => {
        text += data;
        if (sending && text.includes('\r\n\r\n')) answeredWhileSending = true;
      });
      const finish = () => {
        const [head = '', body = ''] = text.split('\r\n\r\n');
        resolve({ written, answeredWhileSending, closedByServer, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body });
      };
      socket.on('error', () => (closedByServer = true));
      socket.on('close', () => {
        closedByServer ||= sending;
        finish();
      });
      const pump = () => {
        while (written < most && !socket.destroyed) {
          written += chunk.length;
          if (!socket.write(chunk)) return void socket.once('drain', pump);
        }
        sending = false;
        // Give an answer still on its way a moment, then hang up.
        setTimeout(() => socket.destroy(), 500);
      };
      socket.write(head, pump);
    });
  }

  const chunked = (bytes: Buffer) => Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);

  it('answers 413 to a body its Content-Length says is over 1 MiB at once, reading none of it, and then closes', async () => {
    const res = await sendUntilClosed(
      `POST /v1/events/trigger HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: 4000000000\r\n\r\n`,
      Buffer.alloc(65_536, 32),
      256 * 1_048_576,
    );
    // Before: body-parser answered once it had read all 4 GB.
    expect(res.answeredWhileSending).toBe(true);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 413, message: 'The request body is larger than 1 MiB', path: '/v1/events/trigger' });
    expect(res.closedByServer).toBe(true);
    // What the server reads after the answer is bounded (1 MiB); socket buffers hold the rest.
    expect(res.written).toBeLessThan(64 * 1_048_576);
  });

  it('answers 413 to a chunked body once 1 MiB of it has come, not when it ends', async () => {
    const res = await sendUntilClosed(
      `POST /v1/events/trigger HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      chunked(Buffer.alloc(65_536, 32)),
      256 * 1_048_576,
    );
    expect(res.answeredWhileSending).toBe(true);
    expect(res.status).toBe(413);
    expect(res.closedByServer).toBe(true);
    expect(res.written).toBeLessThan(64 * 1_048_576);
  });

  it('answers 413 to a body that comes in more than 16,384 pieces (a byte a chunk), and reads one in 16,000', async () => {
    const text = `{"subscriberId":"pieces","data":{"x":"${'y'.repeat(20_000)}"}}`;
    /** The body as `count` chunks: a byte each, the last the rest. (A read of the socket may split one in two.) */
    const inPieces = (count: number) => {
      const pieces = Array.from({ length: count - 1 }, (_, i) => chunked(Buffer.from(text[i])));
      pieces.push(chunked(Buffer.from(text.slice(count - 1))));
      return Buffer.concat([...pieces, Buffer.from('0\r\n\r\n')]);
    };
    const post = (body: Buffer) =>
      sendUntilClosed(
        `POST /v1/subscribers HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
        body,
        body.length,
      );
    const refused = await post(inPieces(text.length));
    expect(refused.status).toBe(413);
    expect(JSON.parse(refused.body)).toMatchObject({ statusCode: 413, message: 'The request body came in more than 16,384 pieces (chunks); send it in fewer, larger ones', path: '/v1/subscribers' });
    await t.a.get('/v1/subscribers/pieces').expect(404);
    expect((await post(inPieces(16_000))).status).toBe(201);
    await t.a.get('/v1/subscribers/pieces').expect(200);
  });

  it('reads no more of a body refused for its pieces: what the socket has read stops growing', async () => {
    // What the server's socket had read when the 413 went out, and when the connection closed.
    const read: { answered?: number; closed?: number } = {};
    const watch = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url !== '/v1/subscribers?pieces') return;
      res.once('prefinish', () => (read.answered = req.socket.bytesRead));
      req.socket.once('close', () => (read.closed = req.socket.bytesRead));
    };
    served.server.prependListener('request', watch);
    try {
      const pieces = Buffer.from('1\r\nx\r\n'.repeat(2_000));
      const res = await sendUntilClosed(
        `POST /v1/subscribers?pieces HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n`,
        pieces,
        64 * 1_048_576,
      );
      expect(res.status).toBe(413);
      await expect.poll(() => read.closed).toBeDefined();
      // Before: it read on, a million pieces more (6 MB), and kept them for the parser.
      expect(read.closed! - read.answered!).toBeLessThan(256 * 1024);
    } finally {
      served.server.off('request', watch);
    }
  });

  it('reads at most about 1 MiB of a body nothing reads (a GET, a refused request) after answering, then closes', async () => {
    for (const [head, status] of [
      [`GET /v1/subscribers/nobody HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: 4000000000\r\n\r\n`, 404],
      ['POST /v1/events/trigger HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000000000\r\n\r\n', 401],
      // A form the dashboard does not read: it is not a form.
      ['GET /dashboard/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 4000000000\r\n\r\n', 200],
      // A form over the dashboard's 16 KiB, refused by its Content-Length.
      ['POST /dashboard/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000000000\r\n\r\n', 413],
    ] as const) {
      const res = await sendUntilClosed(head, Buffer.alloc(65_536, 32), 256 * 1_048_576);
      expect(res.answeredWhileSending, head).toBe(true);
      expect(res.status, head).toBe(status);
      // Before: the server read on for as long as the client sent (all 256 MiB of this test).
      expect(res.closedByServer, head).toBe(true);
      expect(res.written, head).toBeLessThan(64 * 1_048_576);
    }
  });

  it('keeps the connection open after a small body nothing reads, sent after the answer, for the next request', async () => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(`GET /v1/subscribers/nobody HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Length: 5\r\n\r\n`);
    await expect.poll(() => text).toMatch(/^HTTP\/1\.1 404/);
    // The body comes after the answer, within the bound; the next request after the bound's 2 s.
    socket.write('hello');
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await closed;
    expect(text).toMatch(/HTTP\/1\.1 200 OK/);
  });

  /** Writes `bytes` at once, waits `quietMs` without reading, then reads until the server closes (or `waitMs`). */
  function pipelined(bytes: string, quietMs: number, waitMs = 3_000): Promise<{ answers: number; closedByServer: boolean; text: string }> {
    return new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
      let text = '';
      let closedByServer = false;
      socket.pause();
      setTimeout(() => socket.resume(), quietMs);
      socket.setEncoding('latin1');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('error', () => (closedByServer = true));
      socket.on('end', () => (closedByServer = true));
      const done = () => resolve({ answers: text.match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0, closedByServer, text });
      socket.on('close', done);
      setTimeout(() => socket.destroy(), quietMs + waitMs);
    });
  }

  it('answers 32 requests under way at once on a connection, refuses the next with a 429 after them and closes, running nothing after it', async () => {
    const get = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
    const statusesOf = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    // 200 requests in one write, the answers not read: before, all 200 ran and were answered.
    const flood = await pipelined(get.repeat(200), 300);
    expect(flood.closedByServer).toBe(true);
    expect(statusesOf(flood.text)).toEqual([...Array(32).fill(200), 429]);
    expect(JSON.parse(flood.text.slice(flood.text.lastIndexOf('\r\n\r\n') + 4))).toMatchObject({
      statusCode: 429,
      message: 'This connection has 32 requests under way, the most one may have: send the next once an answer has come',
      path: '/health',
    });
    // A write among them is answered, not lost with the connection; one after the refusal is not run.
    const create = (subscriberId: string) => {
      const body = JSON.stringify({ subscriberId });
      return `POST /v1/subscribers HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    };
    const mixed = await pipelined(create('piped') + get.repeat(40) + create('after-refusal'), 300);
    expect(statusesOf(mixed.text)).toEqual([201, ...Array(31).fill(200), 429]);
    await t.a.get('/v1/subscribers/piped').expect(200);
    await t.a.get('/v1/subscribers/after-refusal').expect(404);
    const few = await pipelined(get.repeat(5) + 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 100);
    expect(few.answers).toBe(6);
  });

  it('reads no more of a connection refused for its requests under way, and closes one that sends on', async () => {
    // Answers that take a second: the 32 stay under way while the client writes more.
    const slow = express();
    slow.get('/slow', (_req, res) => void setTimeout(() => res.json({ ok: true }), 1_000));
    slow.get('/fast', (_req, res) => void res.json({ ok: true }));
    const server = createServer(slow);
    let requests = 0;
    server.server.on('request', () => requests++);
    await new Promise<void>((resolve) => server.server.listen(0, '127.0.0.1', resolve));
    try {
      const socket = net.connect((server.server.address() as AddressInfo).port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.on('error', () => undefined);
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
      const started = Date.now();
      const one = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
      socket.write(one('/slow').repeat(32) + one('/fast'));
      // Then on and on, each write after the last has been read.
      for (let i = 0; i < 20 && !socket.destroyed; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        socket.write(one('/fast').repeat(1_000));
      }
      // Before: every one was parsed and held (214 MB from 7 MB of requests) until the slow answers ended.
      expect((await closed) - started).toBeLessThan(1_000);
      expect(requests).toBeLessThan(2_100);
    } finally {
      await server.drain(0);
    }
  });

  it('answers a request followed by bytes after its Connection: close, and ignores them; answers bad bytes after the requests before them', async () => {
    const body = JSON.stringify({ subscriberId: 'closing' });
    const closing = await pipelined(
      `POST /v1/subscribers HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}GET /health HTTP/1.1\r\nHost: x\r\n\r\n`,
      100,
    );
    // Before: a 400 "not valid HTTP" in place of the 201, though the subscriber was made.
    expect(closing.text).toMatch(/^HTTP\/1\.1 201 /);
    expect(closing.answers).toBe(1);
    await t.a.get('/v1/subscribers/closing').expect(200);
    const garbled = await pipelined(`GET /v1/subscribers/closing HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\n\r\nNOT HTTP\r\n\r\n`, 100);
    expect([...garbled.text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))).toEqual([200, 400]);
    expect(garbled.closedByServer).toBe(true);
  });

  it('keeps no file open for answers queued on a connection its client closed (the contract, the example page)', async () => {
    const files = [CONTRACT_PATH, path.join(INBOX_EXAMPLE_DIR, 'inbox.js')];
    const heldOpen = () =>
      fs.readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return files.includes(fs.readlinkSync(`/proc/self/fd/${fd}`));
        } catch {
          return false; // closed meanwhile
        }
      }).length;
    for (const file of ['/v1/openapi.yaml', '/examples/inbox/inbox.js']) {
      // 30 at once, under the bound, each run; the client leaves once the first answer comes.
      await new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write(`GET ${file} HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(30)));
        socket.once('data', () => socket.destroy());
        socket.on('error', () => {});
        socket.on('close', () => resolve());
      });
    }
    await expect.poll(() => new Promise<number>((resolve) => served.server.getConnections((_err, n) => resolve(n)))).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Before: each answer still queued kept a file handle (and its first 64 KiB) for ever, and the
    // server kept each in its list of answers under way (for the drain), files or not.
    expect(heldOpen()).toBe(0);
    expect(served.answersUnderWay()).toBe(0);
  });

  it('refuses an Expect: 100-continue body its Content-Length says is over 1 MiB without asking for it', async () => {
    const res = await pipelined(`POST /v1/events/trigger HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n`, 0);
    expect(res.text.startsWith('HTTP/1.1 413')).toBe(true);
    expect(res.text).not.toContain('100 Continue');
    expect(JSON.parse(res.text.split('\r\n\r\n')[1])).toMatchObject({ statusCode: 413, message: 'The request body is larger than 1 MiB' });
    // Under the cap it is asked for, and read.
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (text === chunk && text.startsWith('HTTP/1.1 100 Continue')) socket.write('{}');
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(`POST /v1/events/trigger HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`);
    await closed;
    expect(text.startsWith('HTTP/1.1 100 Continue')).toBe(true);
    // The body was read: the trigger's schema answers it.
    expect(text).toMatch(/HTTP\/1\.1 400 Bad Request/);
  });

  it('answers 408 naming the path to a request whose body does not arrive in time, while the app waits for it', { timeout: 15_000 }, async () => {
    // Node looks for late requests every 5 s (ARRIVAL_MS.check); a second in all, for this test
    // (and less for the headers: Node keeps to neither while they are longer).
    const { headersTimeout, requestTimeout } = served.server;
    Object.assign(served.server, { headersTimeout: 500, requestTimeout: 1_000 });
    try {
      const res = await rawExchange(`POST /v1/subscribers?x=1 HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${t.a.key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"subscr`);
      expect(res.status).toBe(408);
      expect(JSON.parse(res.body)).toMatchObject({ statusCode: 408, message: 'The request took too long to arrive', path: '/v1/subscribers' });
    } finally {
      Object.assign(served.server, { headersTimeout, requestTimeout });
    }
  });

  it('gives a request 20 s for its headers and 60 s in all', () => {
    expect({ headers: served.server.headersTimeout, whole: served.server.requestTimeout }).toEqual({ headers: 20_000, whole: 60_000 });
  });

  it('sends X-Content-Type-Options: nosniff with API answers, errors included', async () => {
    for (const res of [await t.a.get('/v1/subscribers').expect(200), await t.http.get('/v1/subscribers').expect(401), await t.http.get('/nowhere').expect(404), await t.http.get('/health').expect(200)]) {
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });
});

describe('/metrics', () => {
  it('is not served without a configured token, and answers 401 to a request without it', async () => {
    expect((await t.http.get('/metrics').expect(404)).body).toMatchObject({ statusCode: 404, path: '/metrics' });
    t.deps.config.metricsToken = 'hostile-metrics-token';
    try {
      for (const res of [await t.http.get('/metrics'), await t.a.get('/metrics'), await t.http.get('/metrics').set('Authorization', 'Bearer hostile-metrics-token-2')]) {
        expect(res.status).toBe(401);
        expect(res.text).not.toContain('herald_http_requests_total');
      }
      expect((await t.http.get('/metrics').set('Authorization', 'Bearer hostile-metrics-token').expect(200)).text).toContain('herald_jobs');
    } finally {
      t.deps.config.metricsToken = undefined;
    }
  });
});

describe('a failed docs build', () => {
  it('is remembered: later requests are a 503 with the error body at once, with no new build', async () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-docs-'));
    let builds = 0;
    const app = express();
    app.get('/docs', docsPage(t.deps.logger, path.join(folder, 'index.html'), async () => {
      builds++;
      throw new Error('redocly is missing');
    }));
    try {
      for (let i = 0; i < 3; i++) {
        const res = await supertest(app).get('/docs').expect(503);
        expect(res.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable', path: '/docs' });
      }
      expect(builds).toBe(1);
      // Built by hand meanwhile (`npm run docs`): served from then on.
      fs.writeFileSync(path.join(folder, 'index.html'), '<!doctype html><title>API</title>');
      const page = await supertest(app).get('/docs').expect(200);
      expect(page.text).toContain('<title>API</title>');
      expect(builds).toBe(1);
      // No other site may frame it.
      expect(page.headers).toMatchObject({ 'x-frame-options': 'DENY', 'content-security-policy': "frame-ancestors 'none'" });
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});
