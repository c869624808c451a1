import type { Knex } from 'knex';

// A channel step's send and a cancel race for the job while a worker holds it: the worker's last
// look before it sends and the cancel's look at the jobs under way are each one conditional write
// of this column, so exactly one of them wins. NULL: neither yet. 0: a cancel closed it, and no
// send of the job begins. n > 0: the send of the job's attempt n began (a claim after a crash is a
// later attempt, whose send may begin again).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('jobs', (t) => {
    t.integer('send_gate').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('jobs', (t) => {
    t.dropColumn('send_gate');
  });
}
