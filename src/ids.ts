import { randomBytes, randomInt } from 'node:crypto';

const RANDOM_SPACE = 2 ** 48;
let lastTime = -1;
let lastRandom = 0;
// The time part of the ids of the last millisecond: a fan-out makes thousands in one.
let prefixTime = -1;
let prefix = '';

/** 12 hex digits of a whole number below 2^48, as two 24-bit halves: V8 writes small integers in hex twice as fast. */
const hex12 = (n: number) => Math.floor(n / 2 ** 24).toString(16).padStart(6, '0') + (n % 2 ** 24).toString(16).padStart(6, '0');

/**
 * A 24-hex-digit id: 12 digits of milliseconds since the epoch, then 12 random ones. Ids sort by
 * creation time, which keeps list order stable and index inserts append-only. Within one
 * millisecond (or if the clock steps back) the random part counts up instead, so ids made by one
 * process always sort in the order they were made.
 */
export function newId(now: number = Date.now()): string {
  let time = now;
  if (time <= lastTime) {
    time = lastTime;
    lastRandom += 1;
    if (lastRandom >= RANDOM_SPACE) {
      time += 1;
      lastRandom = 0;
    }
  } else {
    // randomInt draws from a pool of random bytes Node keeps; randomBytes went to OpenSSL for every id.
    lastRandom = randomInt(RANDOM_SPACE / 2); // room to count up
  }
  lastTime = time;
  if (time !== prefixTime) {
    prefixTime = time;
    prefix = time.toString(16).padStart(12, '0').slice(-12);
  }
  return prefix + hex12(lastRandom);
}

/**
 * An environment's public inbox application identifier (`app_` and 24 hex digits): random rather
 * than its id, so it says nothing of when the environment was made, and names nothing else.
 */
export function newApplicationIdentifier(): string {
  return `app_${randomBytes(12).toString('hex')}`;
}
