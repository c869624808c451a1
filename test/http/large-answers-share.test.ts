// Of the memory large pages may hold together, one organization holds at most half, its
// environments together (src/answer-memory.ts): a tenant's slow readers in all its environments
// cannot keep another tenant's large pages waiting.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { listen } from '../helpers/browser.js';
import { unreadAnswer } from '../helpers/requests.js';
import { insertSubscriber } from '../../src/db/repos/subscribers.js';
import { LARGE_PAGE_BYTES } from '../../src/answer-memory.js';

const MiB = 1024 * 1024;
const t = useTestApp({ config: { largeAnswers: { bytes: 24 * MiB, waitMs: 400 } } });

let served: Awaited<ReturnType<typeof listen>>;
let base: string;
beforeAll(async () => {
  served = await listen(t.app);
  base = served.url;
});
afterAll(async () => served?.close());

describe("an organization's share of the large pages' memory", () => {
  it('is its environments’ together: a second environment of one tenant waits, another tenant does not', async () => {
    // Nine subscribers of 1 MiB in each environment: 9 MiB a page, a large one; two fit in the
    // 24 MiB this app allows, but not in one organization's half of it.
    const environments = { a: t.environments.a, aProduction: t.environments.aProduction, b: t.environments.b };
    for (const environmentId of Object.values(environments)) {
      for (let i = 0; i < 9; i++) await insertSubscriber(t.db, environmentId, { subscriberId: `large-${i}`, data: { blob: 'x'.repeat(MiB) } }, t.clock.now());
    }
    expect(9 * MiB).toBeGreaterThan(LARGE_PAGE_BYTES);
    const page = (key: string) => ({ url: `${base}/v1/subscribers?limit=100`, headers: { Authorization: `Bearer ${key}` } });

    const first = page(t.a.key);
    const held = await unreadAnswer(first.url, first.headers);
    expect(held.status).toBe(200);
    const sameTenant = page(t.aProduction.key);
    const refused = await fetch(sameTenant.url, { headers: sameTenant.headers });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    await refused.arrayBuffer();
    const otherTenant = page(t.b.key);
    const answered = await fetch(otherTenant.url, { headers: otherTenant.headers });
    expect(answered.status).toBe(200);
    expect((await answered.json()).data).toHaveLength(9);
    held.stop();
  });
});
