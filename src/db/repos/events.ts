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
  // Its snapshot's text, or for an event written before snapshots its own copy (EVENTS_WITH_WORKFLOWS).
  if (row.workflow === '') throw new Error(`Event ${String(row.id)} names a workflow snapshot that is not stored`);
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

/**
 * The row of a new event, whose workflow is stored already as the snapshot `snapshot`
 * (repos/workflow-snapshots.ts): the event names it and keeps no copy of its own.
 */
export function eventRow(event: Omit<EventRecord, 'canceledAt'>, snapshot: string): Record<string, unknown> {
  return {
    id: event.id,
    environment_id: event.environmentId,
    transaction_id: event.transactionId,
    workflow_key: event.workflow.workflowId,
    workflow: '',
    workflow_snapshot: snapshot,
    payload: writeJson(event.payload),
    overrides: writeJson(event.overrides),
    actor: writeJson(event.actor),
    created_at: event.createdAt,
  };
}

/** Inserts an event (eventRow); a reused transactionId surfaces as the database's unique violation. */
export async function insertEvent(trx: Runner, event: Omit<EventRecord, 'canceledAt'>, snapshot: string): Promise<void> {
  await trx('events').insert(eventRow(event, snapshot));
}

/** An event's columns, its workflow read from its snapshot (or its own copy, written before snapshots). */
const EVENTS_WITH_WORKFLOWS = `SELECT e.id, e.environment_id, e.transaction_id, COALESCE(s.body, e.workflow) AS workflow, e.payload, e.overrides, e.actor, e.canceled_at, e.created_at
  FROM events e LEFT JOIN workflow_snapshots s ON s.environment_id = e.environment_id AND s.digest = e.workflow_snapshot`;

// Every job a worker runs reads its event: a prepared statement, not the query builder,
// with its columns named so that PostgreSQL keeps it prepared (sqlite.ts, postgres.ts).
const EVENT_BY_ID = `${EVENTS_WITH_WORKFLOWS} WHERE e.id = ?`;

/**
 * Reads an event. With `lock`, PostgreSQL holds a share lock on it until the transaction ends, so
 * a cancel (which updates the row) cannot slip between reading "not canceled" and creating jobs.
 */
export async function findEvent(db: Runner, id: string, lock = false): Promise<EventRecord | undefined> {
  const [row] = await selectRows<Record<string, unknown>>(db, lock && isPostgres(db as Db) ? `${EVENT_BY_ID} FOR SHARE OF e` : EVENT_BY_ID, [id]);
  return row ? toRecord(row) : undefined;
}

export async function findEventByTransaction(db: Runner, environmentId: string, transactionId: string): Promise<EventRecord | undefined> {
  const [row] = await selectRows<Record<string, unknown>>(db, `${EVENTS_WITH_WORKFLOWS} WHERE e.environment_id = ? AND e.transaction_id = ?`, [environmentId, transactionId]);
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
