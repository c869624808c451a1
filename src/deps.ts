import type { Db } from './db/knex.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Logger } from './logger.js';

/** What the HTTP layer and the engine need from the outside world, passed in rather than imported. */
export interface Deps {
  db: Db;
  clock: Clock;
  config: Config;
  logger: Logger;
}
