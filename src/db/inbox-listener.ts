// PostgreSQL: the process's LISTEN connection (pg-listen.ts) hears the inbox changes other
// processes commit (repos/inbox.ts notifyInboxChanged) and tells this process's streams on the
// inbox bus. NOTIFY is best effort: a dropped connection is reopened, and
// every stream is told to look (`*`); the hub's periodic catch-up covers what falls between.
import type { Db } from './knex.js';
import { isPostgres } from './knex.js';
import { INBOX_CHANNEL } from './repos/inbox.js';
import { tellInbox } from './inbox-bus.js';
import { listenOn, type Listening } from './pg-listen.js';

export type InboxListenerHandle = Listening;

/**
 * Starts listening for the inbox changes of other processes (`origin` names this one, whose own
 * changes reach its streams after their commit already). SQLite: nothing to listen to.
 */
export function startInboxListener(db: Db, origin: string, onError: (err: unknown) => void = () => undefined): InboxListenerHandle {
  if (!isPostgres(db)) return { opened: Promise.resolve(), close: async () => undefined };
  return listenOn(db, INBOX_CHANNEL, {
    heard(payload) {
      const space = payload.indexOf(' ');
      if (payload.slice(0, space) === origin) return;
      const keys = payload.slice(space + 1);
      tellInbox(db, keys === '*' ? '*' : keys.split(','));
    },
    // Every stream looks for what came meanwhile.
    missed: () => tellInbox(db, '*'),
    error: onError,
  });
}
