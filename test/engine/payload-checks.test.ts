// The payload check thread (engine/payload-checks.ts) as the trigger uses it: a workflow version's
// schema is sent once, and again only when the thread has let it go.
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CHECK_THREAD_LIMITS, KEPT_SCHEMAS, PayloadChecks, payloadChecks, REMEMBER_STOPPED_MS, type CheckAsked } from '../../src/engine/payload-checks.js';

let keys = 0;
const uniqueKey = () => `version-${++keys}`;
const schema = (n: number) => ({ type: 'object', properties: { a: { type: 'string', maxLength: n } }, required: ['a'] });

describe('payloadChecks', () => {
  it("checks each payload against its version's schema, sent to the thread once, and sent again once the thread has let it go", async () => {
    const check = (key: string, n: number, payload: unknown) => payloadChecks.check(key, schema(n), payload, 1_000);
    expect((await check('first', 3, { a: 'abc' })).errors).toEqual([]);
    // Asked again without the schema: the thread still has it compiled.
    expect((await check('first', 3, { a: 'abcd' })).errors).toMatchObject([{ keyword: 'maxLength', instancePath: '/a' }]);
    expect((await check('first', 3, {})).errors).toMatchObject([{ keyword: 'required' }]);
    // Enough other versions that the thread keeps the first no longer: it says so, and is sent it again.
    for (let i = 0; i < KEPT_SCHEMAS; i++) expect((await check(`other-${i}`, 1, { a: 'x' })).errors).toEqual([]);
    expect((await check('first', 3, { a: 'abcd' })).errors).toMatchObject([{ keyword: 'maxLength', instancePath: '/a' }]);
    expect((await check('first', 3, { a: 'ab' })).errors).toEqual([]);
  });
});

/** Whether a message posted to a thread is a payload check (the spies below leave every other thread's alone). */
const isCheck = (message: unknown): message is CheckAsked => typeof message === 'object' && message !== null && 'patternChars' in message && 'key' in message;

/**
 * Kills the thread whenever it is asked a check that `kills` (true for it), as a payload or schema
 * that runs it out of memory would: the check never reaches the thread, which is terminated.
 */
function killThreadOn(kills: (asked: CheckAsked) => boolean) {
  const post = Worker.prototype.postMessage;
  return vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
    if (isCheck(message) && kills(message)) {
      void this.terminate();
      return;
    }
    post.call(this, message);
  });
}

const hasPayload = (text: string) => (asked: CheckAsked) => asked.payload?.includes(text) === true;

describe('payloadChecks when its thread dies', () => {
  afterEach(() => vi.restoreAllMocks());

  it('answers the checks in flight when the thread died on a new thread, and starts it again for the next', async () => {
    let times = 0;
    killThreadOn((asked) => hasPayload('dies-once')(asked) && times++ === 0);
    const check = (key: string, payload: unknown) => payloadChecks.check(key, schema(3), payload, 1_000);
    const [before, killing] = await Promise.all([check(uniqueKey(), { a: 'abcd' }), check(uniqueKey(), { a: 'dies-once' })]);
    // Sent twice: the thread died at the first, and answered the second.
    expect(times).toBe(2);
    expect(before.errors).toMatchObject([{ keyword: 'maxLength', instancePath: '/a' }]);
    expect(killing.errors).toMatchObject([{ keyword: 'maxLength', instancePath: '/a' }]);
    expect((await check(uniqueKey(), { a: 'abc' })).errors).toEqual([]);
  });

  it('answers a check that kills the thread each time it runs, alone on a new one, with why; the checks in flight with it are answered', async () => {
    const killer = killThreadOn(hasPayload('kills'));
    const check = (key: string, payload: unknown) => payloadChecks.check(key, schema(3), payload, 1_000);
    const killerKey = uniqueKey();
    const [first, killing, last] = await Promise.all([check(uniqueKey(), { a: 'abcd' }), check(killerKey, { a: 'kills' }), check(uniqueKey(), { a: 'ab' })]);
    expect(first.errors).toMatchObject([{ keyword: 'maxLength' }]);
    expect(last.errors).toEqual([]);
    expect(killing).toMatchObject({ stopped: expect.stringContaining('twice') });
    // Twice: once among the others, once alone on a new thread; never again.
    const killings = () => killer.mock.calls.filter(([asked]) => isCheck(asked) && hasPayload('kills')(asked)).length;
    expect(killings()).toBe(2);
    expect((await check(uniqueKey(), { a: 'abc' })).errors).toEqual([]);
    // Asked again (a client retrying), it is answered at once with why, the thread not asked.
    expect(await check(killerKey, { a: 'kills' })).toMatchObject({ stopped: killing.stopped });
    expect(killings()).toBe(2);
  });

  it('forgets a check that stopped the thread after a while: it is run again', async () => {
    const checks = new PayloadChecks({ timeoutMs: 5_000, resourceLimits: CHECK_THREAD_LIMITS, rememberStoppedMs: 200 });
    const killer = killThreadOn(hasPayload('kills'));
    const key = uniqueKey();
    expect(await checks.check(key, schema(3), { a: 'kills' }, 1_000)).toMatchObject({ stopped: expect.stringContaining('twice') });
    expect(await checks.check(key, schema(3), { a: 'kills' }, 1_000)).toMatchObject({ stopped: expect.stringContaining('twice') });
    const sent = () => killer.mock.calls.filter(([asked]) => isCheck(asked) && hasPayload('kills')(asked)).length;
    expect(sent()).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 250));
    killer.mockRestore();
    expect((await checks.check(key, schema(3), { a: 'kills' }, 1_000)).errors).toMatchObject([{ keyword: 'maxLength' }]);
  });

  it('answers a save whose schema kills the thread each time it compiles with why, and at once when it is saved again', async () => {
    const killer = killThreadOn((asked) => asked.schema?.includes('kills') === true);
    const killing = { type: 'object', properties: { kills: { type: 'string' } } };
    expect(await payloadChecks.problems(killing)).toEqual([{ field: 'body/payloadSchema', message: expect.stringContaining('could not be compiled') }]);
    const compiles = killer.mock.calls.filter(([asked]) => isCheck(asked)).length;
    expect(await payloadChecks.problems(killing)).toEqual([{ field: 'body/payloadSchema', message: expect.stringContaining('could not be compiled') }]);
    expect(killer.mock.calls.filter(([asked]) => isCheck(asked)).length).toBe(compiles);
    expect(await payloadChecks.problems({ type: 'string' })).toEqual([]);
  });
});

describe('payloadChecks bounds its thread', () => {
  afterEach(() => vi.restoreAllMocks());

  it('starts its thread with a bounded heap', async () => {
    const limits: unknown[] = [];
    const post = Worker.prototype.postMessage;
    vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      if (isCheck(message)) limits.push(this.resourceLimits);
      post.call(this, message);
    });
    expect((await payloadChecks.check(uniqueKey(), schema(3), { a: 'abc' }, 1_000)).errors).toEqual([]);
    expect(limits).toEqual([expect.objectContaining({ maxOldGenerationSizeMb: CHECK_THREAD_LIMITS.maxOldGenerationSizeMb })]);
  });

  it('stops a thread that answers nothing for the timeout: its checks are sent again, the one that hangs it answered with why', async () => {
    const checks = new PayloadChecks({ timeoutMs: 2_000, resourceLimits: CHECK_THREAD_LIMITS, rememberStoppedMs: REMEMBER_STOPPED_MS });
    // A check the thread never answers, as one that ran for ever would be.
    const post = Worker.prototype.postMessage;
    vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      if (!(isCheck(message) && hasPayload('hangs')(message))) post.call(this, message);
    });
    const [hanging, other] = await Promise.all([checks.check(uniqueKey(), schema(3), { a: 'hangs' }, 1_000), checks.check(uniqueKey(), schema(3), { a: 'ab' }, 1_000)]);
    expect(hanging).toMatchObject({ stopped: expect.stringContaining('took more than 2 s, twice') });
    expect(other.errors).toEqual([]);
    expect((await checks.check(uniqueKey(), schema(3), { a: 'abc' }, 1_000)).errors).toEqual([]);
  });
});
