import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import path from 'node:path';
import { sqliteFileOf, type Db } from '../db/knex.js';
import { readOrCreateKeyFile } from '../crypto.js';
import { sealClearChannels } from '../db/repos/subscriber-channels.js';

/** The key file of a SQLite database: `herald.key` in the database's folder; none for PostgreSQL or memory. */
export function keyFileOf(databaseUrl: string): string | undefined {
  const database = sqliteFileOf(databaseUrl);
  return database && path.join(path.dirname(database), 'herald.key');
}

/**
 * The secret that seals credentials at rest, settled at start: HERALD_SECRET when set; else, on a
 * SQLite file, the key file beside the database (made on first start, said once, since losing it
 * loses every sealed value); else (PostgreSQL) none, said loudly at every start. With a secret,
 * subscribers' webhook URLs still stored in clear are sealed now.
 */
export async function settleSecret(config: Config, db: Db, logger: Logger): Promise<string | undefined> {
  let secret = config.secret;
  if (!secret) {
    const file = keyFileOf(config.databaseUrl);
    if (file) {
      const key = readOrCreateKeyFile(file);
      secret = key.secret;
      if (key.created) {
        logger.warn({ file }, 'HERALD_SECRET is not set: Herald created a secret key file to encrypt credentials at rest. Back it up with the database: without it, stored credentials cannot be read');
      }
    } else {
      logger.warn(
        'HERALD_SECRET is not set: integration credentials, subscribers’ webhook URLs and the webhook and inbox signing secrets are stored IN CLEAR in the database. Set HERALD_SECRET to a long random value (the same in every process) and restart',
      );
    }
  }
  if (secret) {
    const sealed = await sealClearChannels(db, secret);
    if (sealed > 0) logger.info({ sealed }, 'Encrypted subscribers’ webhook URLs stored in clear');
  }
  return secret;
}
