import type { Knex } from 'knex';
import { FailureLog, type Logger } from '../logger.js';

/** knex's messages about a connection lost or not acquired: they come once per try while the database is down. */
const CONNECTION_FAILURE = /^(Connection Error|Acquire connection error)\b/;

/** A message without the stack knex puts in some: its `    at …` lines. */
const withoutStack = (message: unknown) =>
  String(message)
    .split('\n')
    .filter((line) => !/^\s+at /.test(line))
    .join('\n');

/**
 * knex's own messages as lines of the process's log. A connection failure comes once per try while
 * the database is down, each with a stack, to the console: here each kind is a FailureLog, its run
 * logged once. Any other warning (a migration that failed and why, a lock to release) is logged as
 * it comes, at warn, without its stack.
 */
export function driverLog(logger: Logger): Knex.Config['log'] {
  const failures = new Map<string, FailureLog>();
  const warn = (message: unknown) => {
    const text = withoutStack(message);
    const kind = CONNECTION_FAILURE.exec(text)?.[1];
    if (kind === undefined) return logger.warn({ source: 'knex' }, text);
    if (!failures.has(kind)) failures.set(kind, new FailureLog(logger, `database driver: ${kind.toLowerCase()}`, { source: 'knex' }));
    failures.get(kind)!.failed(text);
  };
  return {
    warn,
    error: warn,
    deprecate: (method: string, alternative: string) => logger.warn({ source: 'knex' }, `${method} is deprecated; use ${alternative}`),
    debug: (message: unknown) => logger.debug({ source: 'knex' }, withoutStack(message)),
  };
}
