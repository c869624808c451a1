import type { Knex } from 'knex';
import { FailureLog, type Logger } from '../logger.js';

/**
 * knex's own messages as lines of the process's log. Its warnings (a connection lost, one that
 * could not be acquired) come once per try while the database is down, each with a stack, to the
 * console: here a run of them is one FailureLog, each message cut to its first line.
 */
export function driverLog(logger: Logger): Knex.Config['log'] {
  const warnings = new FailureLog(logger, 'database driver warning', { source: 'knex' });
  const firstLine = (message: unknown) => String(message).split('\n', 1)[0];
  return {
    warn: (message: unknown) => void warnings.failed(firstLine(message)),
    error: (message: unknown) => void warnings.failed(firstLine(message)),
    deprecate: (method: string, alternative: string) => logger.warn({ source: 'knex' }, `${method} is deprecated; use ${alternative}`),
    debug: (message: unknown) => logger.debug({ source: 'knex' }, firstLine(message)),
  };
}
