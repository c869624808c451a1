import { selectRows, type Db } from '../knex.js';
import { SEALED_PREFIX } from '../../crypto.js';

/** Where values are sealed whole: integration credentials (sealed whenever a secret was set), endpoints' and the inbox's signing secrets. */
const SEALED_COLUMNS = [
  { table: 'integrations', column: 'credentials', newest: 'updated_at' },
  { table: 'webhook_endpoints', column: 'secret', newest: 'updated_at' },
  { table: 'inbox_secrets', column: 'secret', newest: 'created_at' },
] as const;

/**
 * Up to `perTable` of the values the database holds sealed at rest from each table where they are
 * sealed whole, the latest written first. Start-up opens them to tell whether this process's secret
 * is the one the database was written with.
 */
export async function sealedValues(db: Db, perTable: number): Promise<string[]> {
  const values: string[] = [];
  for (const { table, column, newest } of SEALED_COLUMNS) {
    const rows = await selectRows<{ value: string }>(db, `SELECT ${column} AS value FROM ${table} WHERE ${column} LIKE ? ORDER BY ${newest} DESC LIMIT ?`, [
      `${SEALED_PREFIX}%`,
      perTable,
    ]);
    values.push(...rows.map((row) => row.value));
  }
  return values;
}
