// The throttle step: at most `threshold` notifications per subscriber (and `throttleKey` value)
// through a workflow step in a window that opens with the first of them. The window is decided
// here, without the database; the count is one upsert (repos/throttles.ts), exact across workers.
import { createHash } from 'node:crypto';
import type { Transaction } from '../db/knex.js';
import type { EventRecord } from '../db/repos/events.js';
import { countThrottleHit } from '../db/repos/throttles.js';
import type { Schemas } from '../contract.js';
import { addMs, durationMs, parseInstant, valueAt } from './durations.js';

export type ThrottleStep = Extract<Schemas['Step'], { type: 'throttle' }>;

/** Why a notification's remaining steps were skipped, as its jobs' execution details say it. */
export const THROTTLED = 'Throttled';

/** The window a hit that opens one would open: when it ends, or why the payload gave none. */
function throttleWindowEnd(step: ThrottleStep, payload: Record<string, unknown>, now: Date): { endsAt: Date } | { invalid: string } {
  if (!step.windowPath) return { endsAt: addMs(now, durationMs(step.amount!, step.unit!)) };
  const value = valueAt(payload, step.windowPath);
  const instant = parseInstant(value);
  if (instant) {
    return instant > now ? { endsAt: addMs(instant, 0) } : { invalid: `payload.${step.windowPath} is a time already past` };
  }
  const length = value as { amount?: unknown; unit?: unknown } | undefined;
  if (
    length &&
    typeof length === 'object' &&
    Number.isInteger(length.amount) &&
    (length.amount as number) >= 1 &&
    (length.amount as number) <= 1_000_000 &&
    typeof length.unit === 'string' &&
    ['seconds', 'minutes', 'hours', 'days', 'weeks'].includes(length.unit)
  ) {
    return { endsAt: addMs(now, durationMs(length.amount as number, length.unit as Schemas['DurationUnit'])) };
  }
  return { invalid: `payload.${step.windowPath} is neither an ISO 8601 time nor {"amount", "unit"}` };
}

/** Which count a notification is added to: the step's, for one subscriber and key value. */
function throttleKeyOf(event: EventRecord, step: ThrottleStep, subscriberKey: string): string {
  const keyValue = step.throttleKey ? (valueAt(event.payload, step.throttleKey) ?? null) : null;
  return createHash('sha256')
    .update(JSON.stringify([event.environmentId, event.workflow.workflowId, step.stepId, subscriberKey, keyValue]))
    .digest('hex');
}

/** What a throttle step decided for one notification, in the words of its execution detail. */
export interface ThrottleDecision {
  throttled: boolean;
  detail: string;
}

/**
 * Counts a notification that reached a throttle step, in the transaction that records it: let
 * through while the window's count is within the threshold, throttled beyond it.
 */
export async function passThrottle(trx: Transaction, event: EventRecord, step: ThrottleStep, subscriberKey: string, now: Date): Promise<ThrottleDecision> {
  const window = throttleWindowEnd(step, event.payload, now);
  if ('invalid' in window) return { throttled: false, detail: `Not throttled: ${window.invalid}` };
  const threshold = step.threshold ?? 1;
  const counted = await countThrottleHit(trx, { key: throttleKeyOf(event, step, subscriberKey), environmentId: event.environmentId, windowEndsAt: window.endsAt }, now);
  const tally = `${counted.hits} of ${threshold} in the window ending ${counted.endsAt}`;
  return counted.hits > threshold ? { throttled: true, detail: `${THROTTLED}: ${tally}` } : { throttled: false, detail: `Let through: ${tally}` };
}
