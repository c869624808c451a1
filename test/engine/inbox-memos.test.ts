// What the inbox remembers of allowed origins and signing secrets is kept per database: two apps in
// one process (as tests make them) never answer from each other's memo.
import { afterEach, describe, expect, it } from 'vitest';
import { createOrganization } from '../../src/db/repos/accounts.js';
import { replaceOrigins } from '../../src/db/repos/inbox-access.js';
import { originAllowed } from '../../src/engine/inbox-tokens.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

const opened: TestDb[] = [];
afterEach(async () => {
  for (const testDb of opened.splice(0)) await testDb.close();
});

async function databaseAllowing(origins: string[]): Promise<{ db: TestDb['db']; environmentId: string }> {
  const testDb = await createTestDb();
  opened.push(testDb);
  const { environmentIds } = await createOrganization(testDb.db, { name: 'Memo', plan: 'enterprise', environments: ['development'] });
  await replaceOrigins(testDb.db, environmentIds.development, origins);
  return { db: testDb.db, environmentId: environmentIds.development };
}

describe('the inbox memos', () => {
  it("answer from each database's own origins, whichever was asked first", async () => {
    const first = await databaseAllowing(['https://app.example']);
    const second = await databaseAllowing([]);
    const now = Date.now();
    expect(await originAllowed(first.db, 'https://app.example', first.environmentId, now)).toBe(true);
    // The same environment and origin asked of another database: its own answer, not the memo's.
    expect(await originAllowed(second.db, 'https://app.example', first.environmentId, now)).toBe(false);
    expect(await originAllowed(second.db, 'https://app.example', second.environmentId, now)).toBe(false);
    expect(await originAllowed(first.db, 'https://app.example', first.environmentId, now)).toBe(true);
  });
});
