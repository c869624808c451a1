import type { Schemas } from '../contract.js';

const UNIT_MS: Record<Schemas['DurationUnit'], number> = {
  seconds: 1000,
  minutes: 60_000,
  hours: 3_600_000,
  days: 86_400_000,
  weeks: 604_800_000,
};

/** The length of `amount` `unit`s in milliseconds (days and weeks as 24-hour days: UTC has no DST). */
export function durationMs(amount: number, unit: Schemas['DurationUnit']): number {
  return amount * UNIT_MS[unit];
}

/**
 * The last instant a job may wait for. Times are stored as ISO text and compared as text, and past
 * the year 9999 `toISOString` writes `+0YYYYY-…`, which sorts before every four-digit year: a wait
 * of a million weeks would be over at once.
 */
export const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** `date` plus `ms`, at most LAST_INSTANT. */
export function addMs(date: Date, ms: number): Date {
  return new Date(Math.min(date.getTime() + ms, LAST_INSTANT));
}

/** Reads a dotted path (`post.id`) out of an object. */
export function valueAt(source: unknown, path: string): unknown {
  let value: unknown = source;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** An ISO 8601 time with a zone (`2026-11-22T09:30:00Z`, `…+01:00`); undefined for anything else. */
export function parseInstant(value: unknown): Date | undefined {
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(value)) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
