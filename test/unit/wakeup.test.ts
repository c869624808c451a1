// The runner's wake-ups: a woken loop waits for more work to claim together only while work lately
// arrives often enough for more to come within the wait; a lone trigger is claimed at once.
import { describe, expect, it } from 'vitest';
import { Wakeup } from '../../src/engine/wakeup.js';

function wakeupAt(times: number[]): Wakeup {
  let now = 0;
  const wake = new Wakeup(() => now);
  for (const at of times) {
    now = at;
    wake.notify();
  }
  return wake;
}

describe('a wake-up', () => {
  it('expects no more work within a short wait when work has come seldom, or first after a quiet spell', () => {
    expect(wakeupAt([0]).expectsMoreWithin(30)).toBe(false);
    expect(wakeupAt([0, 500, 1_000, 1_500]).expectsMoreWithin(30)).toBe(false);
    expect(wakeupAt([0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 3_600_000]).expectsMoreWithin(30)).toBe(false);
    // Whatever the wait: a coalescing window longer than the average's cap still sees a lone trigger.
    expect(wakeupAt([0, 2, 4, 6, 8, 10, 3_600_000]).expectsMoreWithin(500)).toBe(false);
  });

  it('expects more within the wait once work comes often: a steady stream is claimed in batches', () => {
    const steady = Array.from({ length: 20 }, (_, i) => i * 2);
    expect(wakeupAt(steady).expectsMoreWithin(30)).toBe(true);
    // After an idle hour, a burst is coalesced again within a few wake-ups.
    const afterQuiet = [0, ...Array.from({ length: 8 }, (_, i) => 3_600_000 + i * 2)];
    expect(wakeupAt(afterQuiet).expectsMoreWithin(30)).toBe(true);
  });

  it('counts what arrived and ends a wait at a notify, or at once for one that came before', async () => {
    const wake = new Wakeup();
    wake.notify();
    expect(await wake.wait(10_000)).toBe(true);
    expect(wake.arrived).toBe(1);
    setTimeout(() => wake.notify(), 5);
    expect(await wake.wait(10_000)).toBe(true);
    expect(await wake.wait(5)).toBe(false);
    expect(wake.arrived).toBe(2);
  });
});
