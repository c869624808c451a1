// Where a trigger reads what it decides on and writes the event it makes: a lone trigger's, and a
// bulk request's, whose events read and write together where the database rewards it.
import DataLoader from 'dataloader';
import { isPostgres, type Db } from './knex.js';
import { findWorkflow, findWorkflowWithSubscriberKeys, type StoredWorkflow } from './repos/workflows.js';
import { subscriberKeys } from './repos/subscribers.js';
import { insertNewEvent, insertNewEventAmongOthers, type NewEventRows } from './new-events.js';

/**
 * Where a trigger reads what it decides on (its workflow, and the internal keys of the subscribers
 * it names that exist) and, in the common case, writes the event it makes.
 */
export interface TriggerStore {
  read(workflowId: string, subscriberIds: string[]): Promise<{ workflow?: StoredWorkflow; keys: Map<string, string> }>;
  /** The new event and the rows that start it; false when its transactionId is taken. */
  write(rows: NewEventRows): Promise<boolean>;
}

/** A lone trigger's reads, on PostgreSQL one round trip, on SQLite two in-process reads; its write on its own. */
export function loneTriggerStore(db: Db, environmentId: string): TriggerStore {
  return {
    read: isPostgres(db)
      ? (workflowId, subscriberIds) => findWorkflowWithSubscriberKeys(db, environmentId, workflowId, subscriberIds)
      : async (workflowId, subscriberIds) => ({
          workflow: await findWorkflow(db, environmentId, workflowId),
          keys: await subscriberKeys(db, environmentId, subscriberIds),
        }),
    write: (rows) => insertNewEvent(db, rows),
  };
}

/**
 * Reads and writes for one bulk request: each workflow is read once, and on PostgreSQL the
 * subscribers named by the events that reach their read in the same turn are read in one query, a
 * round trip each saved (SQLite's reads are in-process: batching them only costs), and the events
 * that reach their write together are written by one statement (db/new-events.ts). Nothing is
 * remembered between turns, so an event that waits for an earlier one reads what that one wrote.
 */
export function bulkTriggerStore(db: Db, environmentId: string): TriggerStore {
  const workflows = new Map<string, Promise<StoredWorkflow | undefined>>();
  const workflow = (workflowId: string) => {
    let found = workflows.get(workflowId);
    if (!found) workflows.set(workflowId, (found = findWorkflow(db, environmentId, workflowId)));
    return found;
  };
  const keys = isPostgres(db) ? keysReadTogether(db, environmentId) : (subscriberIds: string[]) => subscriberKeys(db, environmentId, subscriberIds);
  return {
    read: async (workflowId, subscriberIds) => {
      const [found, existing] = await Promise.all([workflow(workflowId), keys(subscriberIds)]);
      return { workflow: found, keys: existing };
    },
    write: (rows) => insertNewEventAmongOthers(db, rows),
  };
}

/** subscriberKeys, with the ids asked for in the same turn read in one query (no cache across turns). */
function keysReadTogether(db: Db, environmentId: string): (subscriberIds: string[]) => Promise<Map<string, string>> {
  const loader = new DataLoader<string, string | undefined>(
    async (ids) => {
      const found = await subscriberKeys(db, environmentId, [...ids]);
      return ids.map((id) => found.get(id));
    },
    { cache: false, maxBatchSize: 1000 },
  );
  return async (subscriberIds) => {
    // load, not loadMany: loadMany answers a failed read as Error values, which would read as "not found".
    const found = await Promise.all(subscriberIds.map((id) => loader.load(id)));
    return new Map(subscriberIds.flatMap((id, i) => (found[i] === undefined ? [] : [[id, found[i]!]])));
  };
}
