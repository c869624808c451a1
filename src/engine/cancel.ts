// DELETE /events/trigger/:transactionId: stops everything of an event that has not started.
import type { Deps } from '../deps.js';
import { notFound } from '../http/errors.js';
import { findEventByTransaction, markCanceled } from '../db/repos/events.js';
import { cancelableJobs, setJobsStatus } from '../db/repos/jobs.js';
import { settleCanceledNotifications } from '../db/repos/notifications.js';

/**
 * Cancels every job of the event that has not started (waiting, delayed, queued for a retry, merged
 * into a digest, or a fan-out still to come), and marks the event so no further job is created
 * for it. When a canceled job held a digest open, the oldest job that joined it takes over, so
 * the other events of the digest are still sent. Answers whether anything was canceled.
 */
export async function cancelEvent(deps: Deps, environmentId: string, transactionId: string): Promise<boolean> {
  const now = deps.clock.now();
  return deps.db.transaction(async (trx) => {
    const event = await findEventByTransaction(trx, environmentId, transactionId);
    if (!event) throw notFound(`No event with transactionId ${transactionId}`);
    await markCanceled(trx, event.id, now);
    const jobs = await cancelableJobs(trx, event.id);
    const openDigests = jobs.filter((job) => job.digestKey !== null);
    await setJobsStatus(trx, jobs.map((job) => job.id), 'canceled', now);
    for (const leader of openDigests) {
      const [heir, ...others] = await trx('jobs')
        .where({ merged_into: leader.id, status: 'merged' })
        .orderBy([{ column: 'created_at' }, { column: 'id' }])
        .select('id');
      if (!heir) continue;
      await trx('jobs').where({ id: heir.id }).update({
        status: 'delayed',
        digest_key: leader.digestKey,
        run_at: leader.runAt,
        merged_into: null,
        updated_at: now.toISOString(),
      });
      if (others.length > 0) {
        await trx('jobs').whereIn('id', others.map((job: { id: string }) => job.id)).update({ merged_into: heir.id, updated_at: now.toISOString() });
      }
    }
    await settleCanceledNotifications(trx, event.id, now);
    return jobs.length > 0;
  });
}
