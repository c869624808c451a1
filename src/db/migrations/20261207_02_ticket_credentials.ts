import type { Knex } from 'knex';

// A stream ticket carries the credential it was made with (its signing secret's id and when it
// expires), so that the stream it opens ends with that credential, as a stream opened with the
// token itself does. Tickets made before this have neither: their streams live a token's default hour.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbox_tickets', (t) => {
    t.string('kid', 64).nullable();
    t.string('credential_expires_at', 30).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbox_tickets', (t) => {
    t.dropColumn('kid');
    t.dropColumn('credential_expires_at');
  });
}
