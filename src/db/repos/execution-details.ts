// A job's execution details: what each try of it did, as the notification's timeline shows them.
// Written in the transaction of the job's outcome (recordOutcome writes its own on PostgreSQL).
import type { Runner } from '../knex.js';
import { insertRows } from '../insert-rows.js';
import type { Schemas } from '../../contract.js';
import { newId } from '../../ids.js';

export interface NewExecutionDetail {
  jobId: string;
  status: Schemas['ExecutionDetail']['status'];
  detail: string;
  providerId?: string | null;
  raw?: string;
  isRetry: boolean;
}

/** An execution detail's row as stored (addExecutionDetails, recordOutcome). */
export function executionDetailRow(detail: NewExecutionDetail, now: Date) {
  return {
    id: newId(now.getTime()),
    job_id: detail.jobId,
    status: detail.status,
    detail: detail.detail,
    provider_id: detail.providerId ?? null,
    raw: detail.raw ?? null,
    is_retry: detail.isRetry,
    created_at: now.toISOString(),
  };
}

export async function addExecutionDetails(trx: Runner, details: NewExecutionDetail[], now: Date): Promise<void> {
  await insertRows(trx, 'execution_details', details.map((detail) => executionDetailRow(detail, now)));
}

export async function addExecutionDetail(trx: Runner, detail: NewExecutionDetail, now: Date): Promise<void> {
  await addExecutionDetails(trx, [detail], now);
}
