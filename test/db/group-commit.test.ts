// writeTransaction: on SQLite, writes that arrive together share one commit, each in a savepoint,
// each answered only once committed; on PostgreSQL each is an ordinary transaction. Either way a
// work that fails is undone alone, and a commit that fails fails every work it held.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, isPostgres, type Db } from '../../src/db/knex.js';
import { writeStatement, writeTransaction } from '../../src/db/group-commit.js';
import { createTestDb, processDatabaseUrl, testDatabaseUrl, type TestDb } from '../helpers/db.js';
import { countTurns } from '../helpers/turns.js';
import { TURN_MS } from '../../src/turns.js';
import { SLICE_CHARS } from '../../src/db/chunks.js';
import { recordQueries } from '../helpers/queries.js';

let testDb: TestDb;
let db: Db;
/** A second connection, as another process would see the data: only what is committed. */
let observer: Db;

beforeAll(async () => {
  testDb = await createTestDb();
  db = testDb.db;
  observer = createDb(processDatabaseUrl(testDb));
  await db.schema.createTable('gc_parent', (table) => table.string('id').primary());
  // Checked at commit, not at the statement: the way to make a commit itself fail.
  await db.raw(
    'CREATE TABLE gc_child (id varchar(40) PRIMARY KEY, parent_id varchar(40) REFERENCES gc_parent(id) DEFERRABLE INITIALLY DEFERRED)',
  );
});
afterAll(async () => {
  await observer?.destroy();
  await testDb?.close();
});

const committed = async (table: string) => (await observer(table).select('id').orderBy('id')).map((row: { id: string }) => row.id);

describe('writeTransaction', () => {
  it('answers each work once its rows are committed, and undoes a failing work alone', async () => {
    const commits = recordQueries(db, /^commit/i);
    const works = Array.from({ length: 20 }, (_, i) =>
      writeTransaction(db, async (trx) => {
        await trx('gc_parent').insert({ id: `a${String(i).padStart(2, '0')}` });
        if (i === 7) throw new Error('work 7 fails after its insert');
        return i;
      }).then(async (value) => ({ value, visible: (await committed('gc_parent')).includes(`a${String(i).padStart(2, '0')}`) })),
    );
    const outcomes = await Promise.allSettled(works);
    const commitCount = commits.stop().length;

    outcomes.forEach((outcome, i) => {
      if (i === 7) expect(outcome).toMatchObject({ status: 'rejected', reason: { message: 'work 7 fails after its insert' } });
      else expect(outcome).toEqual({ status: 'fulfilled', value: { value: i, visible: true } });
    });
    const expected = Array.from({ length: 20 }, (_, i) => `a${String(i).padStart(2, '0')}`).filter((id) => id !== 'a07');
    expect(await committed('gc_parent')).toEqual(expected);
    // SQLite shares commits between works that arrive together; PostgreSQL commits each.
    if (isPostgres(db)) expect(commitCount).toBe(19);
    else expect(commitCount).toBeLessThan(19);
  });

  it('fails every work of a commit that fails, and keeps none of their rows', async () => {
    const works = [
      writeTransaction(db, (trx) => trx('gc_parent').insert({ id: 'b1' })),
      writeTransaction(db, (trx) => trx('gc_parent').insert({ id: 'b2' })),
      // An orphan: accepted by its statement, refused at commit.
      writeTransaction(db, (trx) => trx('gc_child').insert({ id: 'orphan', parent_id: 'nobody' })),
      writeTransaction(db, (trx) => trx('gc_parent').insert({ id: 'b3' })),
    ];
    const outcomes = await Promise.allSettled(works);
    expect(outcomes[2].status).toBe('rejected');
    const kept = (await committed('gc_parent')).filter((id) => id.startsWith('b'));
    expect(await committed('gc_child')).toEqual([]);
    if (isPostgres(db)) {
      // Separate transactions: only the orphan's fails.
      expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect(kept).toEqual(['b1', 'b2', 'b3']);
    } else {
      // All four arrived in the same turn of the event loop: one commit, which fails for all.
      expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected', 'rejected']);
      expect(kept).toEqual([]);
    }
  });

  it('undoes a failing work that changed far more than 64 KiB, beside works that commit', async () => {
    // A savepoint's undo copy of the pages it changes is kept in memory on SQLite (temp_store,
    // knex.ts), past the size at which SQLite would otherwise move it to a temporary file.
    if (!isPostgres(db)) expect(await db.raw('PRAGMA temp_store')).toEqual([{ temp_store: 2 }]);
    const filler = 'x'.repeat(240); // ids of 244 characters: PostgreSQL's column holds 255
    const bulky = (prefix: string) => Array.from({ length: 300 }, (_, i) => ({ id: `${prefix}${String(i).padStart(3, '0')}${filler}` }));
    const outcomes = await Promise.allSettled([
      writeTransaction(db, (trx) => trx('gc_parent').insert({ id: 'd1' })),
      writeTransaction(db, async (trx) => {
        for (const rows of [bulky('e'), bulky('f')]) await trx('gc_parent').insert(rows);
        throw new Error('fails after 150 KB of rows and as much again of index');
      }),
      writeTransaction(db, (trx) => trx('gc_parent').insert(bulky('g'))),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const kept = await committed('gc_parent');
    expect(kept.filter((id) => /^[efg]/.test(id)).map((id) => id.slice(0, 4))).toEqual(bulky('g').map(({ id }) => id.slice(0, 4)));
    expect(kept).toContain('d1');
  });

  it.runIf(!testDatabaseUrl())('lets the event loop turn between the works of one commit once TURN_MS has passed', async () => {
    // Each work holds the loop 2 ms (better-sqlite3 answers on the calling thread): twenty in one
    // commit are 40 ms, past TURN_MS four times, and the loop must turn between them.
    const holdFor = (ms: number) => {
      for (const until = performance.now() + ms; performance.now() < until; );
    };
    let turns: { stop(): number } | undefined;
    let turnsWhileCommitting = -1;
    const works = Array.from({ length: 20 }, (_, i) =>
      writeTransaction(db, async (trx) => {
        if (i === 0) turns = countTurns();
        await trx('gc_parent').insert({ id: `p${String(i).padStart(2, '0')}` });
        holdFor(2);
        if (i === 19) turnsWhileCommitting = turns!.stop();
      }),
    );
    await Promise.all(works);
    expect(20 * 2).toBeGreaterThan(3 * TURN_MS);
    expect(turnsWhileCommitting).toBeGreaterThanOrEqual(3);
    expect((await committed('gc_parent')).filter((id) => /^p\d\d$/.test(id))).toHaveLength(20);
  });

  it.runIf(!testDatabaseUrl())('lets the event loop turn between one caller\'s commits in a row once TURN_MS has passed', async () => {
    // Each write is queued while the one before it is still finishing its commit, and so follows
    // it at once: twenty of 2 ms are 40 ms, past TURN_MS four times.
    const holdFor = (ms: number) => {
      for (const until = performance.now() + ms; performance.now() < until; );
    };
    const turns = countTurns();
    for (let i = 0; i < 20; i++) {
      await writeTransaction(db, async (trx) => {
        await trx('gc_parent').insert({ id: `q${String(i).padStart(2, '0')}` });
        holdFor(2);
      });
    }
    expect(turns.stop()).toBeGreaterThanOrEqual(3);
    expect((await committed('gc_parent')).filter((id) => /^q\d\d$/.test(id))).toHaveLength(20);
  });

  it('commits works that arrive together in transactions of at most SLICE_CHARS characters, each answered once its own is committed', async () => {
    await db.schema.createTable('gc_large', (table) => {
      table.string('id').primary();
      table.text('body');
    });
    // Twenty works of a fifth of the budget each: one commit would write four budgets' worth.
    const chars = SLICE_CHARS / 5;
    const commits = recordQueries(db, /^commit/i);
    const works = Array.from({ length: 20 }, (_, i) =>
      writeTransaction(db, (trx) => trx('gc_large').insert({ id: `l${String(i).padStart(2, '0')}`, body: 'x'.repeat(chars) }), chars).then(
        async () => (await observer('gc_large').count({ n: '*' }).first())!.n,
      ),
    );
    const seenCommitted = (await Promise.all(works)).map(Number);
    const commitCount = commits.stop().length;
    if (isPostgres(db)) expect(commitCount).toBe(20);
    else {
      expect(commitCount).toBe(4);
      // Each work is answered after its own commit, not after the last one: the first five saw five rows.
      expect(seenCommitted.slice(0, 5)).toEqual([5, 5, 5, 5, 5]);
    }
    expect(await observer('gc_large').count({ n: '*' }).first()).toMatchObject({ n: 20 });
  });

  it.runIf(!testDatabaseUrl())('lets the event loop turn once TURN_MS has passed across commits that follow each other, not once per commit', async () => {
    // Thirty works of 3 ms, three a commit (each declares a third of SLICE_CHARS): ten commits in a
    // row. The loop must turn after at most four works (12 ms), wherever the commits begin.
    const holdFor = (ms: number) => {
      for (const until = performance.now() + ms; performance.now() < until; );
    };
    const turns = countTurns();
    const turnOfWork: number[] = [];
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        writeTransaction(
          db,
          async (trx) => {
            await trx('gc_parent').insert({ id: `r${String(i).padStart(2, '0')}` });
            holdFor(3);
            turnOfWork.push(turns.sofar());
          },
          SLICE_CHARS / 3,
        ),
      ),
    );
    turns.stop();
    const worksInOneTurn = Math.max(...[...new Set(turnOfWork)].map((turn) => turnOfWork.filter((t) => t === turn).length));
    expect(worksInOneTurn).toBeLessThanOrEqual(Math.ceil(TURN_MS / 3));
    expect((await committed('gc_parent')).filter((id) => /^r\d\d$/.test(id))).toHaveLength(30);
  });

  it('nests in a transaction it is given, committing with it', async () => {
    await db.transaction(async (trx) => {
      await writeTransaction(trx, (inner) => inner('gc_parent').insert({ id: 'c1' }));
      expect(await committed('gc_parent')).not.toContain('c1');
    });
    expect(await committed('gc_parent')).toContain('c1');
  });
});

describe('writeStatement', () => {
  it('answers as the statement alone does: SQLite commits statements that arrive together at once, PostgreSQL runs each with no BEGIN or COMMIT', async () => {
    await db('gc_parent').insert(Array.from({ length: 10 }, (_, i) => ({ id: `s${i}` })));
    const statements = recordQueries(db, /^(begin|commit|update)/i);
    const changed = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        writeStatement(db, async (runner) => {
          const n = await runner('gc_parent').where({ id: `s${i}` }).update({ id: `t${i}` });
          return { n, visible: (await committed('gc_parent')).includes(`t${i}`) };
        }),
      ),
    );
    const seen = statements.stop().map((q) => q.sql.trim().split(/\s/)[0].toLowerCase());
    // Each counted its own row, as the statement alone does.
    expect(changed.map((c) => c.n)).toEqual(Array(10).fill(1));
    expect((await committed('gc_parent')).filter((id) => /^[st]\d$/.test(id))).toEqual(Array.from({ length: 10 }, (_, i) => `t${i}`));
    if (isPostgres(db)) {
      expect(seen.filter((word) => word !== 'update')).toEqual([]);
    } else {
      // Not visible to another connection before the commit that holds them, which is shared.
      expect(changed.every((c) => !c.visible)).toBe(true);
      expect(seen.filter((word) => word === 'commit').length).toBeLessThan(10);
    }
  });

  it('fails alone: a statement that fails is undone, beside ones that commit', async () => {
    const outcomes = await Promise.allSettled([
      writeStatement(db, (runner) => runner('gc_parent').insert({ id: 'u1' })),
      writeStatement(db, (runner) => runner('gc_parent').insert({ id: 'u1' })),
      writeStatement(db, (runner) => runner('gc_parent').insert({ id: 'u2' })),
    ]);
    // One of the two u1s is refused (which one is the order they reach the database in; on SQLite, the order they came).
    expect(outcomes.filter((o) => o.status === 'rejected')).toHaveLength(1);
    expect(outcomes[2].status).toBe('fulfilled');
    if (!isPostgres(db)) expect(outcomes[1].status).toBe('rejected');
    expect((await committed('gc_parent')).filter((id) => id.startsWith('u'))).toEqual(['u1', 'u2']);
  });
});
