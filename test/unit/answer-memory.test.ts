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
    const first = await memory.reserve(60, 'a');
    const second = memory.reserve(50, 'b');
    const third = memory.reserve(10, 'c'); // would fit, but waits its turn behind the second
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
    const small = await memory.reserve(10, 'a');
    const huge = memory.reserve(500, 'b');
    expect(await settled(huge)).toBe(false);
    small();
    const release = await huge;
    expect(memory.inUse).toBe(500);
    release();
  });

  it("lets one owner hold at most half, and others go past a waiter held back by its owner's share", async () => {
    const memory = new AnswerMemory(100, 60_000);
    const a = await memory.reserve(60, 'a'); // more than half, but all it holds
    const aAgain = memory.reserve(10, 'a');
    const b = memory.reserve(30, 'b');
    expect(await settled(b)).toBe(true);
    expect(await settled(aAgain)).toBe(false);
    a();
    expect(await settled(aAgain)).toBe(true);
    (await aAgain)();
    (await b)();
    expect(memory.inUse).toBe(0);
  });

  it('refuses with a 503 and Retry-After after the wait, and lets those behind it through', async () => {
    const memory = new AnswerMemory(100, 50);
    const held = await memory.reserve(90, 'a');
    const large = memory.reserve(50, 'b');
    const small = memory.reserve(10, 'c');
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
  it("holds a large page's bytes until the operation releases them, and nothing for a small page", async () => {
    const memory = new AnswerMemory(100 * LARGE_PAGE_BYTES, 60_000);
    const { reserve, release } = answerReservations(memory, 'env', () => false);
    await reserve(LARGE_PAGE_BYTES - 1);
    expect(memory.inUse).toBe(0);
    await reserve(2 * LARGE_PAGE_BYTES);
    await reserve(LARGE_PAGE_BYTES);
    expect(memory.inUse).toBe(3 * LARGE_PAGE_BYTES);
    release();
    release();
    expect(memory.inUse).toBe(0);
  });

  it('refuses what is granted once the client has left, holding it until the operation releases it', async () => {
    const memory = new AnswerMemory(LARGE_PAGE_BYTES, 60_000);
    const held = await memory.reserve(LARGE_PAGE_BYTES, 'other');
    let left = false;
    const { reserve, release } = answerReservations(memory, 'env', () => left);
    const reserved = reserve(LARGE_PAGE_BYTES);
    left = true;
    held();
    await expect(reserved).rejects.toMatchObject({ status: 503 });
    release();
    expect(memory.inUse).toBe(0);
  });
});
