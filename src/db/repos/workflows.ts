import { isPostgres, lowerFunction, selectRows, type Db } from '../knex.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { readBool, readJson, writeJson } from '../json.js';
import { bytesOf, paginate, type Page, type PageRequest } from '../paginate.js';
import { BoundedMap } from '../../bounded-map.js';

export type Workflow = Schemas['Workflow'];
export type Step = Schemas['Step'];
export type ChannelPreferences = Required<Schemas['ChannelPreferences']>;

/** A workflow as stored, with its internal id for rows that point at it. */
export interface StoredWorkflow extends Workflow {
  id: string;
  preferenceSettings: ChannelPreferences;
}

export const ALL_CHANNELS_ON: ChannelPreferences = { in_app: true, email: true, sms: true, chat: true, push: true };

interface WorkflowRow {
  id: string;
  environment_id: string;
  organization_id: string;
  workflow_id: string;
  name: string;
  description: string | null;
  tags: string;
  active: unknown;
  critical: unknown;
  steps: string;
  payload_schema: string | null;
  preference_settings: string;
  created_at: string;
  updated_at: string;
}

/** Stored payloadSchemas this long or longer are parsed once (parsedSchemas). */
export const PARSED_ONCE_SCHEMA_CHARS = 16 * 1024;

/**
 * Large payloadSchemas parsed, by their stored text: every trigger reads its workflow, and a large
 * `const` or `enum` parsed again at each one held the event loop each time. The object is shared
 * by every reader of that text: it is read, never changed.
 */
const parsedSchemas = new BoundedMap<string, NonNullable<Workflow['payloadSchema']>>(100, { total: 32 * 1024 * 1024, weigh: (text) => text.length });

function payloadSchemaOf(stored: string | null): Workflow['payloadSchema'] | null {
  if (typeof stored !== 'string' || stored.length < PARSED_ONCE_SCHEMA_CHARS) return readJson<Workflow['payloadSchema'] | null>(stored, null);
  let parsed = parsedSchemas.get(stored);
  if (parsed === undefined) {
    parsed = JSON.parse(stored) as NonNullable<Workflow['payloadSchema']>;
    parsedSchemas.set(stored, parsed);
  }
  return parsed;
}

function toStored(row: WorkflowRow): StoredWorkflow {
  const workflow: StoredWorkflow = {
    id: row.id,
    workflowId: row.workflow_id,
    _id: row.id,
    name: row.name,
    tags: readJson(row.tags, []),
    active: readBool(row.active),
    critical: readBool(row.critical),
    steps: readJson(row.steps, []),
    preferenceSettings: { ...ALL_CHANNELS_ON, ...readJson(row.preference_settings, {}) },
    _organizationId: row.organization_id,
    _environmentId: row.environment_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.description !== null) workflow.description = row.description;
  const payloadSchema = payloadSchemaOf(row.payload_schema);
  if (payloadSchema) workflow.payloadSchema = payloadSchema;
  return workflow;
}

/** The wire shape: the stored workflow without `id` (the wire calls it `_id`, as Novu's clients do). */
export function toWire({ id: _id, ...workflow }: StoredWorkflow): Workflow {
  return workflow;
}

function scoped(db: Db, environmentId: string) {
  return db('workflows as w')
    .join('environments as e', 'e.id', 'w.environment_id')
    .where('w.environment_id', environmentId)
    .select(db.raw(WORKFLOW_COLUMNS));
}

/** LIKE wildcards in user text are matched literally. */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

export async function listWorkflows(
  db: Db,
  environmentId: string,
  page: PageRequest,
  filters: { query?: string; tag?: string },
): Promise<Page<Workflow>> {
  const query = scoped(db, environmentId);
  if (filters.query) {
    // Lowercased on both sides, any letter (lowerFunction): SQLite's LIKE ignores the case of ASCII letters only, PostgreSQL's of none.
    const pattern = `%${likeLiteral(filters.query.toLowerCase())}%`;
    const lower = lowerFunction(db);
    query.where((q) =>
      q.whereRaw(`${lower}(w.name) like ? escape '\\'`, [pattern]).orWhereRaw(`${lower}(w.workflow_id) like ? escape '\\'`, [pattern]),
    );
  }
  if (filters.tag) {
    // Tags are a JSON array of strings: one of its elements must be the tag.
    const elements = isPostgres(db) ? 'SELECT value FROM jsonb_array_elements_text(w.tags::jsonb)' : 'SELECT value FROM json_each(w.tags)';
    query.whereRaw(`? IN (${elements})`, [filters.tag]);
  }
  return paginate<WorkflowRow, Workflow>(
    query,
    page,
    [
      { column: 'w.created_at', order: 'asc' },
      { column: 'w.id', order: 'asc' },
    ],
    (rows) => rows.map((row) => toWire(toStored(row))),
    query,
    bytesOf(['w.steps', 'w.payload_schema']),
  );
}

// One workflow of an environment by its workflowId, with its organization.
const ONE_WORKFLOW = `FROM workflows w JOIN environments e ON e.id = w.environment_id
  WHERE w.environment_id = ? AND w.workflow_id = ? LIMIT 1`;

// WorkflowRow's columns by name: on PostgreSQL a statement that reads `*` is not kept prepared, and on
// SQLite its rows are named one by one (sqlite.ts, postgres.ts).
const WORKFLOW_COLUMNS = `w.id, w.environment_id, e.organization_id, w.workflow_id, w.name, w.description, w.tags, w.active,
  w.critical, w.steps, w.payload_schema, w.preference_settings, w.created_at, w.updated_at`;

const WORKFLOW_BY_ID = `SELECT ${WORKFLOW_COLUMNS} ${ONE_WORKFLOW}`;

export async function findWorkflow(db: Db, environmentId: string, workflowId: string): Promise<StoredWorkflow | undefined> {
  const [row] = await selectRows<WorkflowRow>(db, WORKFLOW_BY_ID, [environmentId, workflowId]);
  return row ? toStored(row) : undefined;
}

const WORKFLOW_BY_INTERNAL_ID = `SELECT ${WORKFLOW_COLUMNS} FROM workflows w JOIN environments e ON e.id = w.environment_id
  WHERE w.environment_id = ? AND w.id = ? LIMIT 1`;

/** What Herald's ids look like (ids.ts): only such a text is looked up as an `_id`. */
const INTERNAL_ID = /^[0-9a-f]{24}$/;

/**
 * A workflow by its workflowId or, when none has it, by its `_id` (Herald's own id, the one Novu's
 * clients hold): the paths `/workflows/{workflowId}` take either. A workflowId always wins, so
 * nothing that worked by workflowId changes.
 */
export async function findWorkflowByEitherId(db: Db, environmentId: string, workflowIdOrId: string): Promise<StoredWorkflow | undefined> {
  const byKey = await findWorkflow(db, environmentId, workflowIdOrId);
  if (byKey || !INTERNAL_ID.test(workflowIdOrId)) return byKey;
  const [row] = await selectRows<WorkflowRow>(db, WORKFLOW_BY_INTERNAL_ID, [environmentId, workflowIdOrId]);
  return row ? toStored(row) : undefined;
}

// The subscribers' keys as one JSON object (subscriberId → internal id), in the workflow's row.
// The ids are made an array first, so that each is looked up in the (environment, subscriberId)
// index: written as `IN (SELECT …)` PostgreSQL hash-joined them with every subscriber of the
// environment, a cost that grows with the environment rather than with the trigger.
const WORKFLOW_WITH_SUBSCRIBER_KEYS = `SELECT ${WORKFLOW_COLUMNS},
  (SELECT coalesce(json_object_agg(s.subscriber_id, s.id), '{}') FROM subscribers s
    WHERE s.environment_id = w.environment_id AND s.subscriber_id = ANY (ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))) AS subscriber_keys
  ${ONE_WORKFLOW}`;

/**
 * PostgreSQL only: a workflow, and the internal keys of those of `subscriberIds` that exist in its
 * environment, in one round trip (what a trigger reads first). No workflow, no keys.
 */
export async function findWorkflowWithSubscriberKeys(
  db: Db,
  environmentId: string,
  workflowId: string,
  subscriberIds: string[],
): Promise<{ workflow?: StoredWorkflow; keys: Map<string, string> }> {
  const [row] = await selectRows<WorkflowRow & { subscriber_keys: Record<string, string> }>(db, WORKFLOW_WITH_SUBSCRIBER_KEYS, [
    JSON.stringify(subscriberIds),
    environmentId,
    workflowId,
  ]);
  return row ? { workflow: toStored(row), keys: new Map(Object.entries(row.subscriber_keys)) } : { keys: new Map() };
}

/** The active workflows of an environment, oldest first. */
export async function activeWorkflows(db: Db, environmentId: string): Promise<StoredWorkflow[]> {
  const rows = await scoped(db, environmentId).where('w.active', true).orderBy([{ column: 'w.created_at' }, { column: 'w.id' }]);
  return rows.map(toStored);
}

export interface WorkflowValues {
  name: string;
  description?: string;
  tags: string[];
  active: boolean;
  critical: boolean;
  steps: Step[];
  payloadSchema?: Workflow['payloadSchema'];
  preferenceSettings: ChannelPreferences;
}

function columns(values: Partial<WorkflowValues>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (values.name !== undefined) out.name = values.name;
  if ('description' in values) out.description = values.description ?? null;
  if (values.tags !== undefined) out.tags = writeJson(values.tags);
  if (values.active !== undefined) out.active = values.active;
  if (values.critical !== undefined) out.critical = values.critical;
  if (values.steps !== undefined) out.steps = writeJson(values.steps);
  if ('payloadSchema' in values) out.payload_schema = writeJson(values.payloadSchema);
  if (values.preferenceSettings !== undefined) out.preference_settings = writeJson(values.preferenceSettings);
  return out;
}

/** Inserts a workflow; a duplicate workflowId surfaces as the database's unique violation. */
export async function insertWorkflow(db: Db, environmentId: string, workflowId: string, values: WorkflowValues, now: Date): Promise<void> {
  const at = now.toISOString();
  await db('workflows').insert({
    id: newId(now.getTime()),
    environment_id: environmentId,
    workflow_id: workflowId,
    ...columns(values),
    created_at: at,
    updated_at: at,
  });
}

export async function updateWorkflow(
  db: Db,
  environmentId: string,
  workflowId: string,
  values: Partial<WorkflowValues>,
  now: Date,
): Promise<boolean> {
  const updated = await db('workflows')
    .where({ environment_id: environmentId, workflow_id: workflowId })
    .update({ ...columns(values), updated_at: now.toISOString() });
  return updated > 0;
}

/** Deletes a workflow by its internal id; subscribers' preferences for it go with it (foreign keys). */
export async function deleteWorkflow(db: Db, environmentId: string, id: string): Promise<boolean> {
  return (await db('workflows').where({ environment_id: environmentId, id }).delete()) > 0;
}
