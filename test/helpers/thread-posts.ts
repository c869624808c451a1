import { Worker } from 'node:worker_threads';
import { vi } from 'vitest';

/** The templates posted to the payload check thread for render's cache (`compile`), while `work` runs. */
export async function compilesPosted(work: () => Promise<unknown>): Promise<Array<{ source: string; escape: boolean }>> {
  const posted = vi.spyOn(Worker.prototype, 'postMessage');
  try {
    await work();
    return posted.mock.calls.flatMap(([message]) => ((message as { compile?: unknown })?.compile as Array<{ source: string; escape: boolean }>) ?? []);
  } finally {
    posted.mockRestore();
  }
}
