import { StartError, type Config } from '../config.js';
import type { Logger } from '../logger.js';
import path from 'node:path';
import { sqliteFileOf, type Db } from '../db/knex.js';
import { open, readOrCreateKeyFile, SealError } from '../crypto.js';
import { sealClearChannels } from '../db/repos/subscriber-channels.js';
import { aSealedValue } from '../db/repos/sealed-values.js';

/** The key file of a SQLite database: `herald.key` in the database's folder; none for PostgreSQL or memory. */
export function keyFileOf(databaseUrl: string): string | undefined {
  const database = sqliteFileOf(databaseUrl);
  return database && path.join(path.dirname(database), 'herald.key');
}

/**
 * A process that cannot open what the database holds sealed would fail every send that needs it,
 * for good: it does not start. (Every process of a deployment needs the same HERALD_SECRET.)
 */
async function checkSecretOpens(db: Db, secret: string | undefined): Promise<void> {
  const sealed = await aSealedValue(db);
  if (sealed === undefined) return;
  if (!secret) {
    throw new StartError('The database holds credentials encrypted with a secret, but HERALD_SECRET is not set: set it to the value they were written with (the same in every process)');
  }
  try {
    open(sealed, secret);
  } catch (err) {
    if (!(err instanceof SealError)) throw err;
    throw new StartError('HERALD_SECRET cannot decrypt the credentials the database holds: it differs from the secret they were written with. Set the same HERALD_SECRET in every process');
  }
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
  await checkSecretOpens(db, secret);
  if (secret) {
    const sealed = await sealClearChannels(db, secret);
    if (sealed > 0) logger.info({ sealed }, 'Encrypted subscribers’ webhook URLs stored in clear');
  }
  return secret;
}
