// The payload check thread (engine/payload-checks.ts) as the trigger uses it: a workflow version's
// schema is sent once, and again only when the thread has let it go.
import { describe, expect, it } from 'vitest';
import { KEPT_SCHEMAS, payloadChecks } from '../../src/engine/payload-checks.js';

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
