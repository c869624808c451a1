// A topic fan-out on PostgreSQL runs as two jobs, each notifying the members whose internal id ends
// in its half of the hex digits. A runner claims both and runs them side by side, each batch in a
// transaction on a connection of its own: the server's inserts for one go on while this process
// builds the rows of the other, and the server uses both cores. SQLite has one writer, so there a
// fan-out stays one job.
import type { Knex } from 'knex';
import { isPostgres, type Db } from './knex.js';

export interface FanoutShard {
  index: number;
  of: number;
}

const POSTGRES_SHARDS = 2;
const HEX_DIGITS = [...'0123456789abcdef'];

/** The shards one fan-out is split into on this database; `undefined` stands for all members. */
export function fanoutShards(db: Db): Array<FanoutShard | undefined> {
  if (!isPostgres(db)) return [undefined];
  return Array.from({ length: POSTGRES_SHARDS }, (_, index) => ({ index, of: POSTGRES_SHARDS }));
}

const digitsOf = (shard: FanoutShard) => HEX_DIGITS.filter((_, value) => value % shard.of === shard.index);

/**
 * Keeps the members of `shard` by the last character of `column` (an id ending in a random hex
 * digit). Shard 0 takes whatever the others do not, so no member is left out by any id.
 */
export function whereInShard(query: Knex.QueryBuilder, column: string, shard: FanoutShard | undefined): void {
  if (!shard) return;
  const lastCharacter = query.client.raw(`substr(??, length(??), 1)`, [column, column]);
  if (shard.index === 0) {
    const others = Array.from({ length: shard.of - 1 }, (_, i) => digitsOf({ index: i + 1, of: shard.of })).flat();
    query.whereNotIn(lastCharacter, others);
  } else {
    query.whereIn(lastCharacter, digitsOf(shard));
  }
}
