import { inList, selectRows, type Db, type Runner } from '../knex.js';
import { readJson, writeJson } from '../json.js';
import type { Channel } from '../../contract.js';
import { chunks } from '../chunks.js';

/** What a subscriber chose in one layer; anything left out defers to the layer below. */
export interface Layer {
  enabled?: boolean;
  channels: Partial<Record<Channel, boolean>>;
}

export interface LayerRow {
  enabled: unknown;
  channels: string;
}

/** A stored layer as the engine reads it; no row is a layer that chose nothing. */
export function toLayer(row: LayerRow | undefined): Layer {
  if (!row) return { channels: {} };
  const layer: Layer = { channels: readJson(row.channels, {}) };
  if (row.enabled !== null && row.enabled !== undefined) layer.enabled = row.enabled === true || row.enabled === 1;
  return layer;
}

/** A change to a layer: `null` clears the layer's choice for that channel. */
export interface LayerChange {
  enabled?: boolean;
  channels: Partial<Record<Channel, boolean | null>>;
}

function merged(current: Layer, change: LayerChange): Layer {
  const channels = { ...current.channels };
  for (const [channel, on] of Object.entries(change.channels) as Array<[Channel, boolean | null | undefined]>) {
    if (on === null) delete channels[channel];
    else if (on !== undefined) channels[channel] = on;
  }
  return { enabled: change.enabled ?? current.enabled, channels };
}

// Each send reads both layers of its subscriber: prepared statements, not the query builder.
export async function globalLayer(db: Runner, subscriberKey: string): Promise<Layer> {
  const [row] = await selectRows<LayerRow>(db, 'SELECT enabled, channels FROM subscriber_global_preferences WHERE subscriber_id = ?', [subscriberKey]);
  return toLayer(row);
}

/** The subscriber's own layer for each workflow it has one for, by the workflow's internal id. */
export async function workflowLayers(db: Db, subscriberKey: string): Promise<Map<string, Layer>> {
  const rows = await db('subscriber_workflow_preferences').where({ subscriber_id: subscriberKey });
  return new Map(rows.map((row) => [row.workflow_id as string, toLayer(row)]));
}

export async function workflowLayer(db: Runner, subscriberKey: string, workflowKey: string): Promise<Layer> {
  const sql = 'SELECT enabled, channels FROM subscriber_workflow_preferences WHERE subscriber_id = ? AND workflow_id = ?';
  const [row] = await selectRows<LayerRow>(db, sql, [subscriberKey, workflowKey]);
  return toLayer(row);
}

/** Merges a change into the global layer and returns the result. */
export async function saveGlobalLayer(db: Db, subscriberKey: string, change: LayerChange, now: Date): Promise<Layer> {
  return db.transaction(async (trx) => {
    const layer = merged(await globalLayer(trx, subscriberKey), change);
    await trx('subscriber_global_preferences')
      .insert({ subscriber_id: subscriberKey, enabled: layer.enabled ?? null, channels: writeJson(layer.channels), updated_at: now.toISOString() })
      .onConflict('subscriber_id')
      .merge();
    return layer;
  });
}

/** Merges a change into the subscriber's layer for one workflow and returns the result. */
export async function saveWorkflowLayer(db: Db, subscriberKey: string, workflowKey: string, change: LayerChange, now: Date): Promise<Layer> {
  return db.transaction(async (trx) => {
    const layer = merged(await workflowLayer(trx, subscriberKey, workflowKey), change);
    await trx('subscriber_workflow_preferences')
      .insert({
        subscriber_id: subscriberKey,
        workflow_id: workflowKey,
        enabled: layer.enabled ?? null,
        channels: writeJson(layer.channels),
        updated_at: now.toISOString(),
      })
      .onConflict(['subscriber_id', 'workflow_id'])
      .merge();
    return layer;
  });
}

/** The global layers of several subscribers, by subscriber key. */
export async function globalLayers(db: Runner, subscriberKeys: string[]): Promise<Map<string, Layer>> {
  const layers = new Map<string, Layer>();
  for (const part of chunks(subscriberKeys)) {
    const ids = inList(db, 'subscriber_id', part);
    const sql = `SELECT subscriber_id, enabled, channels FROM subscriber_global_preferences WHERE ${ids.sql}`;
    for (const row of await selectRows<LayerRow & { subscriber_id: string }>(db, sql, ids.bindings)) layers.set(row.subscriber_id, toLayer(row));
  }
  return layers;
}

/** Several subscribers' own layers for one workflow, by subscriber key. */
export async function workflowLayersOf(db: Runner, workflowKey: string, subscriberKeys: string[]): Promise<Map<string, Layer>> {
  const layers = new Map<string, Layer>();
  for (const part of chunks(subscriberKeys)) {
    const ids = inList(db, 'subscriber_id', part);
    const sql = `SELECT subscriber_id, enabled, channels FROM subscriber_workflow_preferences WHERE workflow_id = ? AND ${ids.sql}`;
    for (const row of await selectRows<LayerRow & { subscriber_id: string }>(db, sql, [workflowKey, ...ids.bindings])) layers.set(row.subscriber_id, toLayer(row));
  }
  return layers;
}
