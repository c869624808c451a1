// DELETE /events/trigger/:transactionId: stops everything of an event that has not started.
import type { Deps } from '../deps.js';
import { notFound } from '../http/errors.js';
import { findEventByTransaction, markCanceled } from '../db/repos/events.js';
import { addExecutionDetail, addExecutionDetails, cancelableJobs, handOverClosedDigests, setJobsStatus } from '../db/repos/jobs.js';
import { settleCanceledNotifications } from '../db/repos/notifications.js';
import { settleDigestRiders } from './schedule.js';

/**
 * Cancels every job of the event that has not started (waiting, delayed, queued for a retry, merged
 * into a digest still open, or a fan-out still to come), and marks the event so no further job is
 * created for it. The other events of a digest are still sent: when a canceled job held a digest
 * open, the oldest job that joined it takes over; when the digest had closed, the jobs after it go
 * on for the oldest other event (handOverClosedDigests). Answers whether anything was stopped.
 */
export async function cancelEvent(deps: Deps, environmentId: string, transactionId: string): Promise<boolean> {
  const now = deps.clock.now();
  return deps.db.transaction(async (trx) => {
    const event = await findEventByTransaction(trx, environmentId, transactionId);
    if (!event) throw notFound(`No event with transactionId ${transactionId}`);
    await markCanceled(trx, event.id, now);
    const cancelable = await cancelableJobs(trx, event.id);
    const handedOver = await handOverClosedDigests(trx, cancelable, now);
    const jobs = cancelable.filter((job) => !handedOver.has(job.id));
    const openDigests = jobs.filter((job) => job.digestKey !== null);
    await setJobsStatus(trx, jobs.map((job) => job.id), 'canceled', now);
    await addExecutionDetails(trx, jobs.map((job) => ({ jobId: job.id, status: 'warning', detail: `Canceled with event ${transactionId}`, isRetry: false })), now);
    for (const job of handedOver) {
      await addExecutionDetail(trx, { jobId: job, status: 'success', detail: `Event ${transactionId} was canceled; goes on for the digest's other events`, isRetry: false }, now);
    }
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
    // A closed digest's send canceled with nobody to take it on: its riders go with it.
    const stopped = new Set(jobs.map((job) => job.notificationId).filter((id): id is string => id !== null));
    for (const notificationId of stopped) await settleDigestRiders(trx, event, notificationId, now);
    return cancelable.length > 0;
  });
}
