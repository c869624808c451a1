// A digest step, all of it: opening a digest or joining the open one (openOrJoinDigest), closing
// it with every event's payload (closeHeldDigest), and who carries it when an event of it is canceled. A digest is led by the job of the event
// that opened it; the jobs of later events are merged into it. While it is open, a canceled
// leader's window goes to the oldest follower (handOverOpenDigest). Once it has closed, its send
// carries every event's payload on the jobs of one notification, its carrier: the others ride in
// it, and take its status when it settles (settleDigestRiders). A canceled carrier's send goes on
// for the oldest other event that is not canceled, without the canceled payload (passOnClosedDigest).
import { createHash } from 'node:crypto';
import type { Db, Runner } from '../db/knex.js';
import type { EventRecord } from '../db/repos/events.js';
import { cancelJobs, insertJobs, type NewJob, type JobRecord } from '../db/repos/jobs.js';
import { addExecutionDetail } from '../db/repos/execution-details.js';
import { closeDigest, digestFollowers, findDigestLeader, insertDigestLeader, closedDigestOf, digestHeirOf, digestRiderSlices, dropDigestKey, handDigestLeadTo, mergedJobIdsOf, moveJob } from '../db/repos/digest-jobs.js';
import { markNotificationsProcessing, settleRiders } from '../db/repos/notifications.js';
import { newId } from '../ids.js';
import { chunks } from '../db/chunks.js';
import { writeTransaction } from '../db/group-commit.js';
import { addMs, durationMs, valueAt } from './durations.js';

type DigestStep = Extract<EventRecord['workflow']['steps'][number], { type: 'digest' }>;

/**
 * A notification reaches a digest step: its job opens the digest of its key (and waits out the
 * window), or joins the one open (merged into it). The key is unique among open digests, so when
 * two triggers race exactly one opens it; the loop covers a digest that closes between the two
 * statements.
 */
export async function openOrJoinDigest(trx: Runner, event: EventRecord, job: NewJob, step: DigestStep, subscriberKey: string, now: Date): Promise<void> {
  const keyValue = step.digestKey ? valueAt(event.payload, step.digestKey) : null;
  const digestKey = createHash('sha256')
    .update(JSON.stringify([event.environmentId, subscriberKey, event.workflow.workflowId, step.stepId, keyValue ?? null]))
    .digest('hex');
  const leader = { ...job, status: 'delayed' as const, runAt: addMs(now, durationMs(step.amount, step.unit)), digestKey };
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await insertDigestLeader(trx, leader, now)) return;
    const open = await findDigestLeader(trx, digestKey);
    if (open) {
      const merged = { ...job, id: newId(now.getTime()), status: 'merged' as const, mergedInto: open.id };
      await insertJobs(trx, [merged], now);
      await addExecutionDetail(trx, { jobId: merged.id, status: 'success', detail: `Merged into the open digest ${open.id}`, isRetry: false }, now);
      return;
    }
  }
  throw new Error(`Could not open or join the digest ${digestKey}`);
}

/**
 * The most bytes of stored JSON the payloads of a digest's `step.events` have together;
 * `step.total_count` counts them all. Bytes, which the database measures without reading them.
 */
export const DIGEST_EVENTS_BYTES = 1024 * 1024;

/**
 * A digest's window is over: the digest a worker holds closes (its key dropped first, so a trigger
 * joining now waits for this, by row lock, and then opens a new one), and answers the state its
 * send goes on with (the events' payloads, the leader's first, as many as fit in
 * DIGEST_EVENTS_BYTES, and the count of them all) and the notifications riding in it; undefined
 * when the worker no longer holds it.
 */
export async function closeHeldDigest(
  db: Db,
  job: JobRecord,
  owner: string,
  payload: unknown,
): Promise<{ state: Record<string, unknown>; count: number; shown: number; riders: string[] } | undefined> {
  const room = DIGEST_EVENTS_BYTES - Buffer.byteLength(JSON.stringify(payload ?? {}));
  if (!(await db.transaction((trx) => closeDigest(trx, job.id, owner)))) return undefined;
  // Closed, the digest has all the followers it will have (one canceled since has left it).
  const followers = await digestFollowers(db, job.id, room);
  const events = [payload, ...followers.filter((follower) => 'payload' in follower).map((follower) => follower.payload)];
  const count = 1 + followers.length;
  const riders = followers.map((follower) => follower.notificationId!).filter(Boolean);
  return { state: { ...job.state, digest: { events, total_count: count } }, count, shown: events.length, riders };
}

/** Riders a transaction marks (markRiders). */
const RIDERS_A_TRANSACTION = 1_000;

/**
 * The notifications riding in a closed digest's send are under way with it (settled with it:
 * settleDigestRiders): marked before its outcome is recorded, RIDERS_A_TRANSACTION a transaction,
 * since 20,000 in one commit held the event loop. Marking twice changes nothing, so a worker that
 * dies half-way leaves the rest to the retry of the digest's job.
 */
export async function markRiders(db: Db, riders: string[], now: Date): Promise<void> {
  for (const part of chunks(riders, RIDERS_A_TRANSACTION)) await writeTransaction(db, (trx) => markNotificationsProcessing(trx, part, now));
}

/**
 * An open digest whose leader was canceled: the leader lets go of its key, and its oldest live
 * follower leads the digest instead, with the key and the window; the other followers are merged
 * into that one.
 */
export async function handOverOpenDigest(trx: Runner, leader: { id: string; digestKey: string; runAt: string }, now: Date): Promise<void> {
  await dropDigestKey(trx, leader.id, now);
  const heir = await digestHeirOf(trx, leader.id);
  if (!heir) return;
  await handDigestLeadTo(trx, heir.id, leader, now);
  await addExecutionDetail(trx, { jobId: heir.id, status: 'success', detail: 'Leads the digest: the event that opened it was canceled', isRetry: false }, now);
}

/** What the heir of a closed digest's send is given to go on with. */
export interface Heir {
  eventId: string;
  notificationId: string;
  /** The digest's state without the canceled carrier's payload. */
  strip(state: Record<string, unknown>): Record<string, unknown>;
  /** The digest step's index: the send is the steps after it. */
  digestStep: number;
}

/**
 * A canceled notification that carries a closed digest's send stops carrying it: `giveTo` hands the
 * send on to the oldest other event of the digest not canceled (and answers true), or, with none,
 * the send stops and its riders settle with this notification. Either way, a notification that had
 * taken the send over from another is out of the digest (its merged job is canceled).
 */
export async function passOnClosedDigest(trx: Runner, notificationId: string, now: Date, giveTo: (heir: Heir) => Promise<void>): Promise<boolean> {
  const digest = await closedDigestOf(trx, notificationId);
  if (!digest) return false;
  const heir = await digestHeirOf(trx, digest.id);
  const merged = await mergedJobIdsOf(trx, notificationId);
  await cancelJobs(trx, merged, now);
  for (const jobId of merged) await addExecutionDetail(trx, { jobId, status: 'warning', detail: "Taken out of the digest's send: its event was canceled", isRetry: false }, now);
  if (!heir) return false;
  // A carrier's own payload is the first of the digest's events (execute.ts, fireDigest; and so on down the heirs).
  const strip = (state: Record<string, unknown>) => {
    const digested = state.digest as { events: unknown[]; total_count: number } | undefined;
    return digested ? { ...state, digest: { events: digested.events.slice(1), total_count: digested.total_count - 1 } } : state;
  };
  await giveTo({ eventId: heir.event_id, notificationId: heir.notification_id, strip, digestStep: digest.step_index });
  return true;
}

/**
 * Cancel's part: the jobs of a canceled event still waiting in a closed digest's send (the steps
 * after the digest) go on for the heir. Answers the jobs handed on.
 */
export async function passOnWaitingSends(trx: Runner, jobs: JobRecord[], transactionId: string, now: Date): Promise<Set<string>> {
  const handed = new Set<string>();
  const waitingBy = new Map<string, JobRecord[]>();
  for (const job of jobs) {
    if (job.kind !== 'step' || job.status === 'merged' || !job.notificationId) continue;
    waitingBy.set(job.notificationId, [...(waitingBy.get(job.notificationId) ?? []), job]);
  }
  for (const [notificationId, waiting] of waitingBy) {
    await passOnClosedDigest(trx, notificationId, now, async (heir) => {
      for (const job of waiting.filter((waitingJob) => waitingJob.stepIndex! > heir.digestStep)) {
        await moveJob(trx, job.id, { eventId: heir.eventId, notificationId: heir.notificationId, state: heir.strip(job.state) }, now);
        await addExecutionDetail(trx, { jobId: job.id, status: 'success', detail: `Event ${transactionId} was canceled; goes on for the digest's other events`, isRetry: false }, now);
        handed.add(job.id);
      }
    });
  }
  return handed;
}

/** Whether the step at `stepIndex` comes after a digest step: its notification may carry a closed digest's send. */
export function followsDigest(steps: ReadonlyArray<{ type: string }>, stepIndex: number): boolean {
  for (let index = 0; index < stepIndex && index < steps.length; index++) if (steps[index].type === 'digest') return true;
  return false;
}

/**
 * Once the notification carrying a closed digest's send is settled, the notifications riding in it
 * take its status (they stay `processing` until then).
 */
export async function settleDigestRiders(trx: Runner, event: EventRecord, notificationId: string, now: Date): Promise<void> {
  if (!event.workflow.steps.some((step) => step.type === 'digest')) return;
  for await (const riders of digestRiderSlices(trx, notificationId)) await settleRiders(trx, notificationId, riders.map((rider) => rider.notificationId), now);
}
