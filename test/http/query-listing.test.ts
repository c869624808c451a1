// A request that breaks the contract is answered with every problem it has (when it is small), each
// found as the first check found it: the listing pass coerces the query as the first pass does.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp({ precompile: true });

describe('the problems of a query listed in full', () => {
  it('names an unknown parameter alone, not the numbers beside it, on the first request a fresh server validates', async () => {
    const res = await t.a.get('/v1/notifications?foo=1&limit=1').expect(400);
    expect(res.body.details).toEqual([{ field: 'query/foo', message: 'is not allowed' }]);
    const other = await t.a.get('/v1/webhook-endpoints?foo=1&limit=1&page=0').expect(400);
    expect(other.body.details).toEqual([{ field: 'query/foo', message: 'is not allowed' }]);
  });
});
