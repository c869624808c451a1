// DELETE /events/trigger/:transactionId: stops everything of an event that has not started.
import type { Deps } from '../deps.js';
import { notFound } from '../errors.js';
import { findEventByTransaction, markCanceled } from '../db/repos/events.js';
import { cancelableJobs, closeSendGates, cancelJobsDroppingDigestKeys, localJobsUnderWay } from '../db/repos/jobs.js';
import { addExecutionDetails } from '../db/repos/execution-details.js';
import { settleCanceledNotifications } from '../db/repos/notifications.js';
import { recordCanceledNotifications } from './webhook-events.js';
import { handOverOpenDigest, passOnWaitingSends, settleDigestRiders } from './digests.js';
import { nextActiveStep } from './schedule.js';

/**
 * Cancels every job of the event that has not started (waiting, delayed, queued for a retry, merged
 * into a digest still open, or a fan-out still to come), and marks the event so no further job is
 * created for it. The other events of a digest are still sent: when a canceled job held a digest
 * open, the oldest job that joined it takes over; when the digest had closed, the jobs after it go
 * on for the oldest other event (digests.ts). Answers whether anything was stopped, or will be: a
 * job a worker has taken stops before it sends unless its send has begun (its send gate, which the
 * cancel closes: jobs.ts), and a send that has begun still stops the active steps after it. Other
 * jobs count when they are still under way once the event is marked: they read the mark before
 * they write (localJobsUnderWay). When all that is left is a send already going out, nothing is
 * stopped and the answer is false; should that send fail, its retry is pending, and a cancel then
 * stops it.
 */
export async function cancelEvent(deps: Deps, environmentId: string, transactionId: string): Promise<boolean> {
  const now = deps.clock.now();
  try {
    return await cancelWhatIsPending(deps, environmentId, transactionId, now);
  } catch (err) {
    if (err instanceof NothingToCancel) return false;
    throw err;
  }
}

/**
 * Nothing of the event was pending or running: the cancel is undone, mark included. An event of a
 * closed digest that did not open it is in the digest's send already; marked canceled, it would be
 * passed over when the event that carries the send is canceled, and lost.
 */
class NothingToCancel extends Error {}

async function cancelWhatIsPending(deps: Deps, environmentId: string, transactionId: string, now: Date): Promise<boolean> {
  return deps.db.transaction(async (trx) => {
    const event = await findEventByTransaction(trx, environmentId, transactionId);
    if (!event) throw notFound(`No event with transactionId ${transactionId}`);
    // The sends under way first, then the event: the order a worker recording an outcome locks them
    // in on PostgreSQL (its job, then the event), so that neither waits on the other for good.
    const sends = event.canceledAt === null ? await closeSendGates(trx, event.id) : undefined;
    // A send that has begun goes out; the active steps after it, if any, are stopped.
    const stepsAfterASend = sends?.sendingSteps.some((index) => nextActiveStep(event, index) !== -1) ?? false;
    await markCanceled(trx, event.id, now);
    // Counted after the mark: a job that wrote its outcome before it does not count (an in-app
    // message stored); one still under way reads the mark and stops.
    const others = sends ? await localJobsUnderWay(trx, event.id) : 0;
    const cancelable = await cancelableJobs(trx, event.id);
    if (cancelable.length === 0 && !sends?.sendsStopped && others === 0 && !stepsAfterASend) throw new NothingToCancel();
    const handedOn = await passOnWaitingSends(trx, cancelable, transactionId, now);
    const jobs = cancelable.filter((job) => !handedOn.has(job.id));
    await cancelJobsDroppingDigestKeys(trx, jobs.map((job) => job.id), now);
    await addExecutionDetails(trx, jobs.map((job) => ({ jobId: job.id, status: 'warning', detail: `Canceled with event ${transactionId}`, isRetry: false })), now);
    for (const leader of jobs) if (leader.digestKey !== null) await handOverOpenDigest(trx, { id: leader.id, digestKey: leader.digestKey, runAt: leader.runAt }, now);
    await recordCanceledNotifications(trx, event, now, () => settleCanceledNotifications(trx, event.id, now));
    // A closed digest's send stopped with no other event to take it on: its riders settle with it.
    const stopped = new Set(jobs.map((job) => job.notificationId).filter((id): id is string => id !== null));
    for (const notificationId of stopped) await settleDigestRiders(trx, event, notificationId, now);
    return true;
  });
}
