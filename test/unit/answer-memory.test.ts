// The memory large answers share: given out in order, more than the whole only to one alone,
// given back once, and refused with a 503 after the wait.
import { describe, expect, it } from 'vitest';
import { AnswerMemory, answerReservations, LARGE_PAGE_BYTES } from '../../src/answer-memory.js';
import { ApiError } from '../../src/errors.js';

/** Whether a promise has settled by the next turn of the event loop. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('AnswerMemory', () => {
  it('grants what fits at once, and the rest in order as memory is given back', async () => {
    const memory = new AnswerMemory(100, 60_000);
    const first = await memory.reserve(60);
    const second = memory.reserve(50);
    const third = memory.reserve(10); // would fit, but waits its turn behind the second
    expect(await settled(second)).toBe(false);
    expect(await settled(third)).toBe(false);
    first();
    first(); // given back once, however often it is called
    expect(memory.inUse).toBe(60);
    expect(await settled(second)).toBe(true);
    expect(await settled(third)).toBe(true);
    (await second)();
    (await third)();
    expect(memory.inUse).toBe(0);
  });

  it('grants more than the whole to one answer alone, once nothing else is held', async () => {
    const memory = new AnswerMemory(100, 60_000);
    const small = await memory.reserve(10);
    const huge = memory.reserve(500);
    expect(await settled(huge)).toBe(false);
    small();
    const release = await huge;
    expect(memory.inUse).toBe(500);
    release();
  });

  it('refuses with a 503 and Retry-After after the wait, and lets those behind it through', async () => {
    const memory = new AnswerMemory(100, 50);
    const held = await memory.reserve(90);
    const large = memory.reserve(50);
    const small = memory.reserve(10);
    const refused = await large.catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 503, headers: { 'Retry-After': '5' } });
    expect((refused as Error).message).toContain('50 bytes');
    (await small)();
    held();
    expect(memory.inUse).toBe(0);
  });
});

describe('answerReservations', () => {
  it("holds a large page's bytes until its answer ends, and nothing for a small page", async () => {
    const memory = new AnswerMemory(100 * LARGE_PAGE_BYTES, 60_000);
    let end!: () => void;
    const reserve = answerReservations(memory, (release) => (end = release));
    await reserve(LARGE_PAGE_BYTES - 1);
    expect(memory.inUse).toBe(0);
    await reserve(2 * LARGE_PAGE_BYTES);
    await reserve(LARGE_PAGE_BYTES);
    expect(memory.inUse).toBe(3 * LARGE_PAGE_BYTES);
    end();
    end();
    expect(memory.inUse).toBe(0);
  });

  it('gives back at once, and refuses, what is granted to an answer whose client left while it waited', async () => {
    const memory = new AnswerMemory(LARGE_PAGE_BYTES, 60_000);
    const held = await memory.reserve(LARGE_PAGE_BYTES);
    let end!: () => void;
    const reserved = answerReservations(memory, (release) => (end = release))(LARGE_PAGE_BYTES);
    end();
    held();
    await expect(reserved).rejects.toMatchObject({ status: 503 });
    expect(memory.inUse).toBe(0);
  });
});
