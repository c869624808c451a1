// An event's row as a trigger writes it, its workflow stored as the snapshot it names, for tests
// that write events straight into the database.
import type { Db } from '../../src/db/knex.js';
import { eventRow, type EventRecord } from '../../src/db/repos/events.js';
import { storeSnapshotOf } from '../../src/db/repos/workflow-snapshots.js';

export async function storedEventRow(db: Db, event: Omit<EventRecord, 'canceledAt'>): Promise<Record<string, unknown>> {
  return eventRow(event, await storeSnapshotOf(db, event.environmentId, event.workflow, new Date(event.createdAt)));
}
