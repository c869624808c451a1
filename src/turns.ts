import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * How long one piece of work over many items (a page's rows made wire objects, a large answer
 * written) may hold the event loop before it lets the loop turn: every other request, the job
 * runner and the inbox streams wait while it runs.
 */
export const TURN_MS = 10;

/**
 * Lets the event loop run what waits (requests, timers, I/O) before going on. On SQLite a statement
 * runs on the calling thread and every promise of a batch resolves at once: batch after batch (a
 * fan-out's 200) would otherwise run as one chain that never returns to the event loop.
 */
export const yieldToEventLoop = (): Promise<void> => nextTurn();

/** A pacer for such work: `await pace()` between items lets the loop turn once `budgetMs` has passed since the last turn. */
export function pacer(budgetMs = TURN_MS): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < budgetMs) return;
    await yieldToEventLoop();
    since = performance.now();
  };
}
