import { isPostgres, type Db } from './knex.js';
import { queryPostgres } from './postgres.js';
import { insertAll, jsonInsertOf } from './insert-rows.js';
import { isUniqueViolation } from './errors.js';
import { tellDueJobs } from './repos/jobs.js';

type Row = Record<string, unknown>;

/** A new event with the notifications and jobs that start it: a trigger whose rows are all known before it writes. */
export interface NewEventRows {
  event: Row;
  notifications: Row[];
  jobs: Row[];
}

/** Events a PostgreSQL statement writes at most: four bulk requests' events in flight. */
const MAX_EVENTS_A_STATEMENT = 100;
/**
 * Statements under way at once, so that the next events' rows go out while the server works on a
 * statement: one in flight held the trigger row back, and more than two gained nothing.
 */
const MAX_WRITING = 2;

interface Waiting {
  rows: NewEventRows;
  resolve(inserted: boolean): void;
  reject(error: unknown): void;
}

interface Queue {
  waiting: Waiting[];
  /** Statements under way, at most MAX_WRITING; one more is due to start when `starting`. */
  writing: number;
  starting: boolean;
}

const queues = new WeakMap<Db, Queue>();

/**
 * Writes a new event and the rows that start it, all or none; false when the event's
 * transactionId is already taken in its environment (nothing is written then). On PostgreSQL one
 * statement; on SQLite writes arriving together share a commit (group-commit.ts).
 */
export async function insertNewEvent(db: Db, { event, notifications, jobs }: NewEventRows): Promise<boolean> {
  try {
    await insertAll(db, [
      { table: 'events', rows: [event] },
      { table: 'notifications', rows: notifications },
      { table: 'jobs', rows: jobs },
    ]);
    tellDueJobs(db, jobs);
    return true;
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
}

/**
 * insertNewEvent, for events that come many at once (a bulk request's). On PostgreSQL the events
 * arriving together (in the same turn of the event loop, or while a write is under way) are
 * written by one statement: a round trip, a parse and a commit for all of them rather than one
 * each. An event whose transactionId is taken (by an earlier event, or by another of the same
 * statement) is skipped with its rows. Should the statement fail as a whole (an environment
 * deleted meanwhile, say), each event is written again on its own, so that only the event at fault
 * fails. A lone trigger does not wait for others: waiting gained it no throughput and lengthened
 * its tail latency (`npm run bench`, the trigger row).
 */
export function insertNewEventAmongOthers(db: Db, rows: NewEventRows): Promise<boolean> {
  if (!isPostgres(db)) return insertNewEvent(db, rows);
  let queue = queues.get(db);
  if (!queue) queues.set(db, (queue = { waiting: [], writing: 0, starting: false }));
  const inserted = new Promise<boolean>((resolve, reject) => queue.waiting.push({ rows, resolve, reject }));
  startWriting(db, queue);
  return inserted;
}

function startWriting(db: Db, queue: Queue): void {
  if (queue.starting || queue.writing >= MAX_WRITING || queue.waiting.length === 0) return;
  // One turn of the event loop first, so that the triggers being handled right now join in.
  queue.starting = true;
  setImmediate(() => {
    queue.starting = false;
    queue.writing += 1;
    void write(db, queue.waiting.splice(0, MAX_EVENTS_A_STATEMENT)).finally(() => {
      queue.writing -= 1;
      startWriting(db, queue);
    });
    startWriting(db, queue);
  });
}

async function write(db: Db, batch: Waiting[]): Promise<void> {
  const alone = (waiting: Waiting) => insertNewEvent(db, waiting.rows).then(waiting.resolve, waiting.reject);
  // A lone event's own statement is already the one to fall back on: it is not sent twice.
  if (batch.length === 1) return alone(batch[0]);
  try {
    const inserted = await insertTogether(db, batch.map((waiting) => waiting.rows));
    batch.forEach((waiting, i) => {
      if (inserted[i]) tellDueJobs(db, waiting.rows.jobs);
      waiting.resolve(inserted[i]);
    });
  } catch {
    await Promise.all(batch.map(alone));
  }
}

/**
 * PostgreSQL: the events in one statement, each table's insert a data-modifying CTE (foreign keys
 * checked at its end, atomic on its own). An event whose transactionId is taken is skipped
 * (ON CONFLICT DO NOTHING waits for a concurrent writer of the same id to commit or roll back), and
 * so are the rows that hang off it. Answers, for each event, whether it was written.
 */
async function insertTogether(db: Db, batch: NewEventRows[]): Promise<boolean[]> {
  const events = batch.map((rows) => rows.event);
  const notifications = batch.flatMap((rows) => rows.notifications);
  const jobs = batch.flatMap((rows) => rows.jobs);
  const ofWritten = (table: string, rows: Row[], i: number) =>
    rows.length > 0 ? `, w${i} AS (${jsonInsertOf(table, rows, 'r')} WHERE r.event_id IN (SELECT id FROM written))` : '';
  const sql =
    `WITH written AS (${jsonInsertOf('events', events)} ON CONFLICT (environment_id, transaction_id) DO NOTHING RETURNING id)` +
    ofWritten('notifications', notifications, 1) +
    ofWritten('jobs', jobs, 2) +
    ' SELECT id FROM written';
  const bindings = [events, ...(notifications.length > 0 ? [notifications] : []), ...(jobs.length > 0 ? [jobs] : [])].map((rows) => JSON.stringify(rows));
  const { rows } = await queryPostgres(db, sql, bindings);
  const written = new Set((rows as Array<{ id: string }>).map((row) => row.id));
  return events.map((event) => written.has(event.id as string));
}
