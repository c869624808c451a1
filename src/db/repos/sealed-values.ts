import { selectRows, type Db } from '../knex.js';
import { SEALED_PREFIX } from '../../crypto.js';

/**
 * One value the database holds sealed at rest, if it holds any: integration credentials (sealed
 * whole whenever a secret was set, so any deployment that sealed anything has one), webhook
 * endpoints' and inbox signing secrets. Start-up opens it to tell whether this process's secret is
 * the one the database was written with.
 */
export async function aSealedValue(db: Db): Promise<string | undefined> {
  const like = `${SEALED_PREFIX}%`;
  for (const [table, column] of [
    ['integrations', 'credentials'],
    ['webhook_endpoints', 'secret'],
    ['inbox_secrets', 'secret'],
  ] as const) {
    const [row] = await selectRows<{ value: string }>(db, `SELECT ${column} AS value FROM ${table} WHERE ${column} LIKE ? LIMIT 1`, [like]);
    if (row) return row.value;
  }
  return undefined;
}
