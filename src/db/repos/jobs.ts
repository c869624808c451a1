// The jobs table: a job's row, its claims and leases (as a leased queue, leased-queue.ts), its
// outcome, the cancel's and the in-app batch's changes, and the reads of a notification's timeline
// and of /metrics. A digest's own rows are in digest-jobs.ts, execution details in
// execution-details.ts.
import type { Db, Runner } from '../knex.js';
import { changeRows, inList, isPostgres, selectRows } from '../knex.js';
import { insertRows } from '../insert-rows.js';
import { tellWorkQueued } from '../work-queued.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';
import { readBool, readJson, writeJson } from '../json.js';
import { chunks } from '../chunks.js';
import { writeStatement } from '../group-commit.js';
import type { DueByEnvironment } from '../due-elsewhere.js';
import { addExecutionDetail, executionDetailRow, type NewExecutionDetail } from './execution-details.js';
import { anyLeasedDue, claimLeased, releaseLeased, renewLeased, type LeaseClaim, type LeasedQueue } from '../leased-queue.js';

export type JobStatus = Schemas['JobStatus'];
export type Job = Schemas['Job'];

export interface JobRecord {
  id: string;
  environmentId: string;
  eventId: string;
  notificationId: string | null;
  kind: 'step' | 'fanout';
  stepIndex: number | null;
  stepId: string | null;
  type: string;
  status: JobStatus;
  providerId: string | null;
  attempts: number;
  runAt: string;
  digestKey: string | null;
  mergedInto: string | null;
  state: Record<string, unknown>;
  createdAt: string;
}

/** What toRecord reads, named so that PostgreSQL keeps a statement returning them prepared (sqlite.ts, postgres.ts). */
const JOB_COLUMNS = 'id, environment_id, event_id, notification_id, kind, step_index, step_id, type, status, provider_id, attempts, run_at, digest_key, merged_into, state, created_at';

export function toRecord(row: Record<string, unknown>): JobRecord {
  return {
    id: row.id as string,
    environmentId: row.environment_id as string,
    eventId: row.event_id as string,
    notificationId: (row.notification_id as string | null) ?? null,
    kind: row.kind as JobRecord['kind'],
    stepIndex: row.step_index === null || row.step_index === undefined ? null : Number(row.step_index),
    stepId: (row.step_id as string | null) ?? null,
    type: row.type as string,
    status: row.status as JobStatus,
    providerId: (row.provider_id as string | null) ?? null,
    attempts: Number(row.attempts),
    runAt: row.run_at as string,
    digestKey: (row.digest_key as string | null) ?? null,
    mergedInto: (row.merged_into as string | null) ?? null,
    state: readJson(row.state, {}),
    createdAt: row.created_at as string,
  };
}

export interface NewJob {
  environmentId: string;
  eventId: string;
  notificationId: string | null;
  kind: JobRecord['kind'];
  stepIndex?: number;
  stepId?: string;
  type: string;
  status: JobStatus;
  runAt: Date;
  digestKey?: string;
  mergedInto?: string;
  state?: Record<string, unknown>;
  /** Given when other rows written with the job must point at it. */
  id?: string;
  /** For a job written already done (an in-app delivery made in its fan-out batch). */
  attempts?: number;
  providerId?: string | null;
}

/** The row of a new job (its id made here unless given). */
export function jobRow(job: NewJob, now: Date) {
  return {
    id: job.id ?? newId(now.getTime()),
    environment_id: job.environmentId,
    event_id: job.eventId,
    notification_id: job.notificationId,
    kind: job.kind,
    step_index: job.stepIndex ?? null,
    step_id: job.stepId ?? null,
    type: job.type,
    status: job.status,
    attempts: job.attempts ?? 0,
    provider_id: job.providerId ?? null,
    run_at: job.runAt.toISOString(),
    digest_key: job.digestKey ?? null,
    merged_into: job.mergedInto ?? null,
    state: writeJson(job.state ?? {}),
    created_at: now.toISOString(),
    updated_at: now.toISOString(),
  };
}

/** Writes new jobs; those due now wake the loops of this process that claim them, once `trx` commits. */
export async function insertJobs(trx: Runner, jobs: NewJob[], now: Date): Promise<void> {
  const rows = jobs.map((job) => jobRow(job, now));
  await insertRows(trx, 'jobs', rows);
  tellDueJobs(trx, rows);
}

/**
 * Says which lanes the new job rows (jobRow's) due at their creation belong to: the loops of this
 * process that claim them wake once `trx` commits (work-queued.ts), the others sleep on.
 */
export function tellDueJobs(trx: Runner, rows: ReadonlyArray<Record<string, unknown>>): void {
  for (const row of rows) {
    if (DUE.has(row.status as JobStatus) && (row.run_at as string) <= (row.created_at as string)) tellWorkQueued(trx, laneOf(row.type as string));
  }
}

/** The job types a send makes: they wait on a provider's network. Every other job is local work. */
export const SEND_TYPES = ['email', 'sms', 'chat', 'push'] as const;
const SEND_TYPE_LIST = SEND_TYPES.map((type) => `'${type}'`).join(', ');

/** The lane a job of `type` is claimed in. */
function laneOf(type: string): Exclude<JobLane, 'all'> {
  if ((SEND_TYPES as readonly string[]).includes(type)) return 'send';
  return type === 'in_app' ? 'in_app' : 'control';
}

/**
 * Which jobs a claim takes: `send` (a provider's network), `in_app` (in-app steps), `control` (the
 * workflow's other steps, which deliver nothing: delay, digest, throttle, fan-out) or all of them.
 * Each lane has its own partial index of due jobs (migrations 50 and of 2026-12-06), whose condition
 * the claim repeats word for word so that both databases use it.
 */
export type JobLane = 'send' | 'in_app' | 'control' | 'all';

/** Statuses of jobs not yet taken, due once their `run_at` comes. */
const DUE_STATUS_LIST: readonly JobStatus[] = ['pending', 'queued', 'delayed'];
const DUE = new Set(DUE_STATUS_LIST);
/** As the due jobs' partial indexes say it, word for word (PostgreSQL matches the text). */
const DUE_STATUSES = `status IN (${DUE_STATUS_LIST.map((status) => `'${status}'`).join(', ')})`;
const LANES: Record<JobLane, { index: string; type: string }> = {
  send: { index: 'jobs_due_send', type: ` AND type IN (${SEND_TYPE_LIST})` },
  in_app: { index: 'jobs_due_in_app', type: ` AND type = 'in_app'` },
  control: { index: 'jobs_due_control', type: ` AND type NOT IN (${SEND_TYPE_LIST}, 'in_app')` },
  all: { index: 'jobs_due', type: '' },
};

/** Due sends by environment, for a claim that leaves some environments out (migration of 2026-11-28). */
export const DUE_SENDS_BY_ENVIRONMENT: DueByEnvironment = {
  table: 'jobs',
  index: 'jobs_due_send_by_environment',
  due: `${DUE_STATUSES}${LANES.send.type}`,
};

/** The jobs as a leased queue, one a lane (leased-queue.ts). */
const QUEUES: Record<JobLane, LeasedQueue> = Object.fromEntries(
  (Object.keys(LANES) as JobLane[]).map((lane) => [
    lane,
    {
      table: 'jobs',
      dueIndex: LANES[lane].index,
      due: DUE_STATUSES,
      leasedIndex: 'jobs_leased',
      also: LANES[lane].type,
      lapsedAt: 'run_at',
      byEnvironment: lane === 'send' ? DUE_SENDS_BY_ENVIRONMENT : undefined,
      returning: JOB_COLUMNS,
      released: 'queued',
    },
  ]),
) as Record<JobLane, LeasedQueue>;

export interface ClaimOptions extends LeaseClaim {
  lane?: JobLane;
}

/**
 * Claims up to `limit` jobs of a lane that are due, or whose worker's lease ran out, for this
 * worker: they become `running` under a lease (claimLeased). Only a claim of sends may leave
 * environments out.
 */
export async function claimDueJobs(db: Db, options: ClaimOptions): Promise<JobRecord[]> {
  const rows = await claimLeased(db, QUEUES[options.lane ?? 'all'], options);
  return rows.map(toRecord).sort((a, b) => (a.runAt < b.runAt ? -1 : a.runAt > b.runAt ? 1 : a.id < b.id ? -1 : 1));
}

/** Whether a claim of `lane` would find a job now: a read, no write (anyLeasedDue). */
export function jobsDue(db: Runner, lane: JobLane, now: Date): Promise<boolean> {
  return anyLeasedDue(db, QUEUES[lane], now);
}

export interface JobUpdate {
  status: JobStatus;
  runAt?: Date;
  providerId?: string | null;
  state?: Record<string, unknown>;
  digestKey?: string | null;
  mergedInto?: string | null;
  /** The claim's attempt is given back: the job did not really try (a deferral, a provider's 429). */
  refundAttempt?: boolean;
}

/** A claimed job's change as a SET list and its values (updateClaimedJob, recordOutcome). */
function jobChange(change: JobUpdate, now: Date): { set: string; values: Array<string | null> } {
  const columns: Record<string, string | null> = { status: change.status, lease_owner: null, lease_expires_at: null, updated_at: now.toISOString() };
  if (change.runAt) columns.run_at = change.runAt.toISOString();
  if (change.providerId !== undefined) columns.provider_id = change.providerId;
  if (change.state) columns.state = writeJson(change.state);
  if (change.digestKey !== undefined) columns.digest_key = change.digestKey;
  if (change.mergedInto !== undefined) columns.merged_into = change.mergedInto;
  // Every job's outcome: plain SQL, not the query builder. The columns set vary with the outcome,
  // a handful of texts, each kept prepared on PostgreSQL.
  const names = Object.keys(columns);
  // A refunded attempt is claimed again under the same number: its send gate opens again.
  const refund = change.refundAttempt ? ', attempts = attempts - 1, send_gate = NULL' : '';
  return { set: `${names.map((name) => `${name} = ?`).join(', ')}${refund}`, values: names.map((name) => columns[name]) };
}

/** The job this worker still holds, and no other. */
const HELD = `WHERE id = ? AND lease_owner = ? AND status = 'running'`;

/**
 * Moves a job on, but only while this worker still holds it: a worker whose lease ran out (and
 * whose job another worker took over) changes nothing. Returns whether it did.
 */
export async function updateClaimedJob(trx: Runner, id: string, owner: string, change: JobUpdate, now: Date): Promise<boolean> {
  const { set, values } = jobChange(change, now);
  return (await changeRows(trx, `UPDATE jobs SET ${set} ${HELD}`, [...values, id, owner])) > 0;
}

/**
 * Keeps a claimed job running under this worker with a new state and its lease renewed to
 * `leaseUntil` (a fan-out going on to its next batch without claiming its job again), while
 * `owner` still holds it. Returns whether it did.
 */
export async function continueClaimedJob(trx: Runner, id: string, owner: string, state: Record<string, unknown>, leaseUntil: Date, now: Date): Promise<boolean> {
  const sql = `UPDATE jobs SET state = ?, lease_expires_at = ?, updated_at = ? ${HELD}`;
  return (await changeRows(trx, sql, [writeJson(state), leaseUntil.toISOString(), now.toISOString(), id, owner])) > 0;
}

/**
 * Records a claimed job's outcome while `owner` still holds it (its change, and its execution
 * detail if it has one), and answers whether its event is canceled now, read under a share lock
 * on PostgreSQL so that a cancel cannot slip in before what follows from the outcome is written.
 * Answers undefined, having changed nothing, when the lease was lost. Every job's outcome goes
 * through here: on PostgreSQL it is one statement, not three round trips.
 */
export async function recordOutcome(
  trx: Runner,
  job: { id: string; eventId: string },
  owner: string,
  change: JobUpdate,
  detail: Omit<NewExecutionDetail, 'jobId'> | undefined,
  now: Date,
): Promise<{ canceledAt: string | null } | undefined> {
  if (!isPostgres(trx as Db)) {
    if (!(await updateClaimedJob(trx, job.id, owner, change, now))) return undefined;
    if (detail) await addExecutionDetail(trx, { ...detail, jobId: job.id }, now);
    const [event] = await selectRows<{ canceled_at: string | null }>(trx, 'SELECT canceled_at FROM events WHERE id = ?', [job.eventId]);
    return event && { canceledAt: event.canceled_at ?? null };
  }
  const { set, values } = jobChange(change, now);
  // The insert and the read take their rows from `changed`: a lost lease changes and reads nothing.
  const insert = detail
    ? `, detail AS (INSERT INTO execution_details (id, job_id, status, detail, provider_id, raw, is_retry, created_at)
         SELECT ?, id, ?, ?, ?, ?, CAST(? AS BOOLEAN), ? FROM changed)`
    : '';
  const row = detail && executionDetailRow({ ...detail, jobId: job.id }, now);
  const detailValues = row ? [row.id, row.status, row.detail, row.provider_id, row.raw, String(row.is_retry), row.created_at] : [];
  const [event] = await selectRows<{ canceled_at: string | null }>(
    trx,
    `WITH changed AS (UPDATE jobs SET ${set} ${HELD} RETURNING id)${insert}
     SELECT canceled_at FROM events WHERE id = ? AND EXISTS (SELECT 1 FROM changed) FOR SHARE`,
    [...values, job.id, owner, ...detailValues, job.eventId],
  );
  return event && { canceledAt: event.canceled_at ?? null };
}

/**
 * Extends the lease of the jobs `owner` claimed and still holds, of those given, until `until`. A
 * job left running by a failure is not among them, and is taken over when its lease ends.
 */
export function renewLeases(db: Db, owner: string, ids: readonly string[], until: Date): Promise<number> {
  return renewLeased(db, QUEUES.all, owner, ids, until);
}

/** Gives jobs a worker holds back, untouched (their attempt too), for another worker to claim now. */
export function releaseJobs(db: Db, ids: string[], owner: string, now: Date): Promise<void> {
  return releaseLeased(db, QUEUES.all, ids, owner, now);
}

/**
 * Jobs a worker holds whose run failed unexpectedly (an error of ours or of the database, not of a
 * provider): back in the queue from `runAt` on (the job's backoff), their attempt spent, instead of
 * running under their lease until it runs out.
 */
export async function retryJobsLater(db: Db, ids: string[], owner: string, now: Date, runAt: Date): Promise<void> {
  for (const part of chunks(ids)) {
    const list = inList(db, 'id', part);
    await changeRows(
      db,
      `UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, run_at = ?, updated_at = ? WHERE lease_owner = ? AND status = 'running' AND ${list.sql}`,
      [runAt.toISOString(), now.toISOString(), owner, ...list.bindings],
    );
  }
}

/**
 * A running send's gate is open while neither its attempt's send nor a cancel has passed it
 * (migration 20261206_05): a claim after a crash is a later attempt, whose send may go again.
 */
const SEND_GATE_OPEN = '(send_gate IS NULL OR (send_gate > 0 AND send_gate < attempts))';

/**
 * A worker's last look before a send: passes the job's send gate for its attempt, while `owner`
 * still holds the job and no cancel closed the gate. False when a cancel came first or the lease
 * was lost (the job may be another worker's now): either way the send must not go. On SQLite it
 * shares the commit of the writes made with it. (A worker that stalled past its lease after passing
 * the gate still sends: the next claim is a later attempt with a gate of its own, as a worker that
 * died mid-send leaves it. Leases are renewed while a send is under way, so that takes a stall.)
 */
export function passSendGate(db: Db, jobId: string, owner: string): Promise<boolean> {
  return writeStatement(db, async (runner) => (await changeRows(runner, `UPDATE jobs SET send_gate = attempts ${HELD} AND ${SEND_GATE_OPEN}`, [jobId, owner])) > 0);
}

/** What a cancel finds of an event's sends under way. */
export interface SendsUnderWay {
  /** Sends whose gate the cancel closed: their workers send nothing and record them canceled. */
  sendsStopped: number;
  /** The step index of each send that had begun: it goes out whatever the cancel says. */
  sendingSteps: number[];
}

/**
 * A cancel's look at an event's sends under way, to be made before it marks the event: the send
 * gate of each send is one statement on the job's own row, as passSendGate is, so on PostgreSQL
 * one of the two waits for the other and exactly one wins; and a worker recording an outcome locks
 * its job, then the event, the order taken here. Only sends are locked: a fan-out batch holds the
 * event first, then its job.
 */
export async function closeSendGates(trx: Runner, eventId: string): Promise<SendsUnderWay> {
  const running = `event_id = ? AND status = 'running' AND type IN (${SEND_TYPE_LIST})`;
  const sendsStopped = await changeRows(trx, `UPDATE jobs SET send_gate = 0 WHERE ${running} AND ${SEND_GATE_OPEN}`, [eventId]);
  const sending = await selectRows<{ step_index: number | string | null }>(trx, `SELECT step_index FROM jobs WHERE ${running} AND send_gate > 0 AND send_gate = attempts`, [eventId]);
  return { sendsStopped, sendingSteps: sending.flatMap((row) => (row.step_index === null ? [] : [Number(row.step_index)])) };
}

/**
 * How many of an event's jobs other than sends are under way (in-app, a fan-out, a delay, a
 * digest), looked at once the cancel has marked the event: each reads the event, held, before it
 * writes a message or the steps that follow (in-app-batch.ts, recordOutcome), so it either ended
 * before the mark, and is not counted, or sees the mark and stops.
 */
export async function localJobsUnderWay(trx: Runner, eventId: string): Promise<number> {
  const [row] = await selectRows<{ n: number | string }>(
    trx,
    `SELECT COUNT(*) AS n FROM jobs WHERE event_id = ? AND status = 'running' AND type NOT IN (${SEND_TYPE_LIST})`,
    [eventId],
  );
  return Number(row.n);
}

/**
 * Jobs of an event that have not started: the ones a cancel stops. A job merged into a digest is
 * one while the digest is open (its leader holds the digest key); once it closed, the event's
 * payload rides in the digest's send. Locked on PostgreSQL until the cancel commits: a worker's
 * claim passes them by, and a job a claim took meanwhile is not among them (else the cancel would
 * mark canceled a job its worker goes on to send).
 */
export async function cancelableJobs(trx: Runner, eventId: string): Promise<JobRecord[]> {
  const query = trx('jobs')
    .where({ event_id: eventId })
    .where((q) =>
      q.whereIn('status', DUE_STATUS_LIST).orWhere((merged) =>
        merged.where('status', 'merged').whereIn('merged_into', trx('jobs').select('id').whereNotNull('digest_key')),
      ),
    );
  if (isPostgres(trx as Db)) query.forUpdate();
  return (await query).map(toRecord);
}

/**
 * Cancels an event's jobs and drops the digest keys they hold, so that no trigger joins a digest
 * they led (the caller hands an open one over to another event: handOverOpenDigest).
 */
export async function cancelJobsDroppingDigestKeys(trx: Runner, ids: string[], now: Date): Promise<void> {
  for (const part of chunks(ids)) await trx('jobs').whereIn('id', part).update({ status: 'canceled', digest_key: null, updated_at: now.toISOString() });
}

/** Cancels jobs, leaving any digest key they hold as it is. */
export async function cancelJobs(trx: Runner, ids: string[], now: Date): Promise<void> {
  for (const part of chunks(ids)) await trx('jobs').whereIn('id', part).update({ status: 'canceled', updated_at: now.toISOString() });
}

/**
 * Of the given jobs, those `owner` still holds. On PostgreSQL they are locked until the transaction
 * ends, so no other worker's takeover slips in between this read and their update.
 */
export async function heldJobIds(trx: Runner, ids: string[], owner: string): Promise<Set<string>> {
  const held = new Set<string>();
  for (const part of chunks(ids)) {
    const query = trx('jobs').whereIn('id', part).where({ lease_owner: owner, status: 'running' }).select('id');
    if (isPostgres(trx as Db)) query.forUpdate();
    for (const row of (await query) as Array<{ id: string }>) held.add(row.id);
  }
  return held;
}

/** Held jobs reach their end: in-app jobs, whose provider is Herald itself when they completed. */
export async function finishInAppJobs(trx: Runner, ids: string[], status: 'completed' | 'skipped' | 'canceled' | 'failed', now: Date): Promise<void> {
  for (const part of chunks(ids)) {
    await trx('jobs')
      .whereIn('id', part)
      .update({ status, lease_owner: null, lease_expires_at: null, provider_id: status === 'completed' ? 'herald' : null, updated_at: now.toISOString() });
  }
}

/** A job as stored, each execution detail with its id: what either shape of a notification's jobs (Herald's, Novu's) is made from. */
export interface StoredJob extends Omit<Job, 'executionDetails'> {
  executionDetails: Array<Schemas['ExecutionDetail'] & { id: string }>;
}

/** A notification's jobs with their execution details, in the order they were created. */
export async function jobsOfNotification(db: Db, notificationId: string): Promise<StoredJob[]> {
  const jobs = await db('jobs').where({ notification_id: notificationId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
  const details = jobs.length
    ? await db('execution_details')
        .whereIn('job_id', jobs.map((job: { id: string }) => job.id))
        .orderBy([{ column: 'created_at' }, { column: 'id' }])
    : [];
  return jobs.map((row: Record<string, unknown>) => {
    const job: StoredJob = {
      jobId: row.id as string,
      stepId: (row.step_id as string) ?? '',
      type: row.type as Job['type'],
      status: row.status as JobStatus,
      attempts: Number(row.attempts),
      runAt: row.run_at as string,
      createdAt: row.created_at as string,
      updatedAt: row.updated_at as string,
      executionDetails: details
        .filter((detail: { job_id: string }) => detail.job_id === row.id)
        .map((detail: Record<string, unknown>) => ({
          id: detail.id as string,
          status: detail.status as Schemas['ExecutionDetail']['status'],
          detail: detail.detail as string,
          ...(detail.provider_id ? { providerId: detail.provider_id as Schemas['ProviderId'] } : {}),
          ...(detail.raw ? { raw: detail.raw as string } : {}),
          isRetry: readBool(detail.is_retry),
          createdAt: detail.created_at as string,
        })),
    };
    if (row.provider_id) job.providerId = row.provider_id as Schemas['ProviderId'];
    return job;
  });
}

/** The statuses of jobs not yet done: what /metrics counts (their number follows the queue, not the table). */
export const OPEN_JOB_STATUSES = ['pending', 'queued', 'delayed', 'running'] as const;

/**
 * Jobs not yet done, counted by status, one count each: on PostgreSQL each reads a partial index of
 * only such jobs (`jobs_due`, `jobs_leased`, whose conditions each status implies), on SQLite a
 * range of its (status, run_at) index. Finished jobs, which grow with the table, are not counted.
 */
export const OPEN_JOBS_BY_STATUS = OPEN_JOB_STATUSES.map((status) => `SELECT '${status}' AS status, count(*) AS n FROM jobs WHERE status = '${status}'`).join(
  '\nUNION ALL ',
);

/** How many jobs not yet done there are in each status (for /metrics). */
export async function countOpenJobsByStatus(db: Db): Promise<Array<{ status: JobStatus; count: number }>> {
  const rows = await selectRows<{ status: JobStatus; n: number | string }>(db, OPEN_JOBS_BY_STATUS, []);
  return rows.map((row) => ({ status: row.status, count: Number(row.n) }));
}

/**
 * Jobs due by a time and not yet taken, or taken: each count reads an index of only those jobs on
 * PostgreSQL (`jobs_due`, `jobs_leased`, whose conditions it repeats), and its (status, run_at)
 * index on SQLite.
 */
export const QUEUE_DEPTH = `SELECT (SELECT count(*) FROM jobs WHERE ${DUE_STATUSES} AND run_at <= ?)
  + (SELECT count(*) FROM jobs WHERE status = 'running') AS n`;

/** Jobs due now and not yet taken, or taken: the work in front of the runners (for /metrics). */
export async function queueDepth(db: Db, now: Date): Promise<number> {
  const [row] = await selectRows<{ n: number | string }>(db, QUEUE_DEPTH, [now.toISOString()]);
  return Number(row.n);
}
