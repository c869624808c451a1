import type { Knex } from 'knex';
import { newApplicationIdentifier } from '../../ids.js';

// Novu-style inbox sessions (POST /v1/inbox/session): each environment's public application
// identifier, which a browser sends to name the environment, and whether the environment takes
// sessions from a subscriber hash at all (off unless its owner turns them on). Environments that
// exist get an identifier here; new ones get theirs when they are made (repos/accounts.ts).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => {
    t.string('inbox_application_id', 40);
    t.boolean('inbox_hash_sessions').notNullable().defaultTo(false);
  });
  for (const { id } of await knex('environments').select('id')) {
    await knex('environments').where({ id }).update({ inbox_application_id: newApplicationIdentifier() });
  }
  await knex.schema.alterTable('environments', (t) => {
    t.unique(['inbox_application_id'], { indexName: 'environments_inbox_application_id' });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('environments', (t) => {
    t.dropUnique(['inbox_application_id'], 'environments_inbox_application_id');
  });
  await knex.schema.alterTable('environments', (t) => {
    t.dropColumn('inbox_hash_sessions');
    t.dropColumn('inbox_application_id');
  });
}
