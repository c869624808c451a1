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

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):?(\d{2}))$/;

/**
 * An ISO 8601 time with a zone (`2026-11-22T09:30:00Z`, `…+01:00`) on a day the calendar has;
 * undefined for anything else. JavaScript's own parser takes any day up to 31 and moves
 * `2099-02-30` on to March 2nd: a time the caller never sent.
 */
export function parseInstant(value: unknown): Date | undefined {
  const parts = typeof value === 'string' ? INSTANT.exec(value) : null;
  if (!parts) return undefined;
  const [year, month, day, hour, minute, second, zoneHours, zoneMinutes] = parts.slice(1).map((part) => Number(part ?? 0));
  const calendarDay = new Date(0);
  calendarDay.setUTCFullYear(year, month - 1, day);
  if (calendarDay.getUTCMonth() !== month - 1 || calendarDay.getUTCDate() !== day) return undefined;
  if (hour > 23 || minute > 59 || second > 59 || zoneHours > 23 || zoneMinutes > 59) return undefined;
  const date = new Date(value as string);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
