import { randomBytes } from 'node:crypto';

const RANDOM_SPACE = 2 ** 48;
let lastTime = -1;
let lastRandom = 0;

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
    lastRandom = randomBytes(6).readUIntBE(0, 6) % (RANDOM_SPACE / 2); // room to count up
  }
  lastTime = time;
  return time.toString(16).padStart(12, '0').slice(-12) + lastRandom.toString(16).padStart(12, '0');
}
