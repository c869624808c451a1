import type { Db, Runner } from '../knex.js';
import { isPostgres, selectRows } from '../knex.js';
import { readJson, writeJson } from '../json.js';
import type { Step, StoredWorkflow } from './workflows.js';
import type { Subscriber } from './subscribers.js';


/** The workflow as triggered: what the event's jobs run, whatever happens to the workflow later. */
export interface WorkflowSnapshot {
  id: string;
  workflowId: string;
  name: string;
  critical: boolean;
  preferenceSettings: StoredWorkflow['preferenceSettings'];
  steps: Step[];
  /** The workflow's tags, which its inbox items carry (absent from events stored before the inbox). */
  tags?: string[];
}

export interface EventRecord {
  id: string;
  environmentId: string;
  transactionId: string;
  workflow: WorkflowSnapshot;
  payload: Record<string, unknown>;
  overrides: Record<string, Record<string, unknown>>;
  actor?: Subscriber;
  canceledAt: string | null;
  createdAt: string;
}

function toRecord(row: Record<string, unknown>): EventRecord {
  return {
    id: row.id as string,
    environmentId: row.environment_id as string,
    transactionId: row.transaction_id as string,
    workflow: readJson(row.workflow, {} as WorkflowSnapshot),
    payload: readJson(row.payload, {}),
    overrides: readJson(row.overrides, {}),
    actor: readJson<Subscriber | undefined>(row.actor, undefined),
    canceledAt: (row.canceled_at as string | null) ?? null,
    createdAt: row.created_at as string,
  };
}

/** The row of a new event. */
export function eventRow(event: Omit<EventRecord, 'canceledAt'>): Record<string, unknown> {
  return {
    id: event.id,
    environment_id: event.environmentId,
    transaction_id: event.transactionId,
    workflow_key: event.workflow.workflowId,
    workflow: writeJson(event.workflow),
    payload: writeJson(event.payload),
    overrides: writeJson(event.overrides),
    actor: writeJson(event.actor),
    created_at: event.createdAt,
  };
}

/** Inserts an event; a reused transactionId surfaces as the database's unique violation. */
export async function insertEvent(trx: Runner, event: Omit<EventRecord, 'canceledAt'>): Promise<void> {
  await trx('events').insert(eventRow(event));
}

// Every job a worker runs reads its event: a prepared statement, not the query builder,
// with its columns named so that PostgreSQL keeps it prepared (sqlite.ts, postgres.ts).
const EVENT_BY_ID = 'SELECT id, environment_id, transaction_id, workflow, payload, overrides, actor, canceled_at, created_at FROM events WHERE id = ?';

/**
 * Reads an event. With `lock`, PostgreSQL holds a share lock on it until the transaction ends, so
 * a cancel (which updates the row) cannot slip between reading "not canceled" and creating jobs.
 */
export async function findEvent(db: Runner, id: string, lock = false): Promise<EventRecord | undefined> {
  const [row] = await selectRows<Record<string, unknown>>(db, lock && isPostgres(db as Db) ? `${EVENT_BY_ID} FOR SHARE` : EVENT_BY_ID, [id]);
  return row ? toRecord(row) : undefined;
}

export async function findEventByTransaction(db: Runner, environmentId: string, transactionId: string): Promise<EventRecord | undefined> {
  const row = await db('events').where({ environment_id: environmentId, transaction_id: transactionId }).first();
  return row ? toRecord(row) : undefined;
}

/** Whether the event is canceled (or gone with its environment) as committed now: a send's last look before it goes. */
export async function isCanceled(db: Runner, id: string): Promise<boolean> {
  const [row] = await selectRows<{ canceled_at: string | null }>(db, 'SELECT canceled_at FROM events WHERE id = ?', [id]);
  return row === undefined || row.canceled_at !== null;
}

/** Marks an event canceled (once); true when this call canceled it. */
export async function markCanceled(trx: Runner, id: string, now: Date): Promise<boolean> {
  return (await trx('events').where({ id }).whereNull('canceled_at').update({ canceled_at: now.toISOString() })) > 0;
}
