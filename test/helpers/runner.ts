import { vi } from 'vitest';
import type { JobRunner } from '../../src/engine/runner.js';

/**
 * Runs `runner` with timers stopped (its waits never time out), so that only a wake-up can move it
 * on after it has found nothing: until `done` holds, or 10 s of real time (Date is not faked; far
 * longer than the work a test gives it). Then stops it: a loop still asleep on a stopped timer (the
 * behaviour such a test guards against) is woken to stop.
 */
export async function runWithTimersStopped(runner: JobRunner, done: () => boolean | Promise<boolean>): Promise<void> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  try {
    runner.start();
    const deadline = Date.now() + 10_000;
    while (!(await done()) && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
  } finally {
    const stopped = runner.stop();
    await vi.advanceTimersByTimeAsync(100);
    vi.useRealTimers();
    await stopped;
  }
}
