import { StartError, type Config } from '../config.js';
import type { Logger } from '../logger.js';
import fs from 'node:fs';
import path from 'node:path';
import { sqliteFileOf, type Db } from '../db/knex.js';
import { open, readOrCreateKeyFile, SealError } from '../crypto.js';
import { sealClearChannels } from '../db/repos/subscriber-channels.js';
import { sealedValues } from '../db/repos/sealed-values.js';

/** The key file of a SQLite database: `herald.key` in the database's folder; none for PostgreSQL or memory. */
export function keyFileOf(databaseUrl: string): string | undefined {
  const database = sqliteFileOf(databaseUrl);
  return database && path.join(path.dirname(database), 'herald.key');
}

/** Sealed values read at start, from each table that holds them: the latest written. */
const SEALED_SAMPLE = 20;

/**
 * A process that can open none of what the database holds sealed would fail every send that needs
 * it, for good: it does not start. Some that do not open (left from an earlier secret) are said,
 * not refused: the latest do. (Every process of a deployment needs the same HERALD_SECRET.)
 */
async function checkSecretOpens(db: Db, secret: string | undefined, source: SecretSource, logger: Logger): Promise<void> {
  const sealed = await sealedValues(db, SEALED_SAMPLE);
  if (sealed.length === 0) return;
  if (!secret) {
    throw new StartError('The database holds credentials encrypted with a secret, but HERALD_SECRET is not set: set it to the value they were written with (the same in every process)');
  }
  const opens = (value: string) => {
    try {
      open(value, secret);
      return true;
    } catch (err) {
      if (err instanceof SealError) return false;
      throw err;
    }
  };
  const unopened = sealed.filter((value) => !opens(value)).length;
  if (unopened === 0) return;
  if (unopened < sealed.length) {
    logger.warn({ unopened, of: sealed.length }, 'Some stored credentials were encrypted with another secret than this one and cannot be read: sends that need them fail until they are entered again');
    return;
  }
  if (source.keyFile) {
    throw new StartError(
      source.created
        ? `The key file ${source.keyFile} is missing, and the database holds credentials encrypted with it: put back the herald.key backed up with the database, or set HERALD_SECRET to the secret they were written with`
        : `The key file ${source.keyFile} does not open the credentials the database holds: they were encrypted with another key. Put back the herald.key backed up with the database, or set HERALD_SECRET to the secret they were written with`,
    );
  }
  throw new StartError('HERALD_SECRET cannot decrypt the credentials the database holds: it differs from the secret they were written with. Set the same HERALD_SECRET in every process');
}

/** Where the secret came from: HERALD_SECRET, or a SQLite database's key file (made now or not). */
type SecretSource = { keyFile?: string; created?: boolean };

/**
 * The secret that seals credentials at rest, settled at start: HERALD_SECRET when set; else, on a
 * SQLite file, the key file beside the database (made on first start, said once, since losing it
 * loses every sealed value); else (PostgreSQL) none, said loudly at every start. With a secret,
 * subscribers' webhook URLs still stored in clear are sealed now.
 */
export async function settleSecret(config: Config, db: Db, logger: Logger): Promise<string | undefined> {
  let secret = config.secret;
  let source: SecretSource = {};
  if (!secret) {
    const file = keyFileOf(config.databaseUrl);
    if (file) {
      const key = readOrCreateKeyFile(file);
      secret = key.secret;
      source = { keyFile: file, created: key.created };
      if (key.created) {
        logger.warn({ file }, 'HERALD_SECRET is not set: Herald created a secret key file to encrypt credentials at rest. Back it up with the database: without it, stored credentials cannot be read');
      }
    } else {
      logger.warn(
        'HERALD_SECRET is not set: integration credentials, subscribers’ webhook URLs and the webhook and inbox signing secrets are stored IN CLEAR in the database. Set HERALD_SECRET to a long random value (the same in every process) and restart',
      );
    }
  }
  try {
    await checkSecretOpens(db, secret, source, logger);
  } catch (err) {
    // A key file made just now cannot be the one the database was written with: not left to be taken for it.
    if (source.created && source.keyFile) fs.rmSync(source.keyFile, { force: true });
    throw err;
  }
  if (secret) {
    const sealed = await sealClearChannels(db, secret);
    if (sealed > 0) logger.info({ sealed }, 'Encrypted subscribers’ webhook URLs stored in clear');
  }
  return secret;
}
