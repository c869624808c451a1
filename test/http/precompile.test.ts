import { describe, expect, it } from 'vitest';
import { createBackend } from '../../src/http/backend.js';
import { precompileValidators } from '../../src/http/api.js';

// The server listens once every request validator is compiled (main.ts awaits createApp, which
// awaits this): compiled after it listened, they held the event loop while the first requests waited.
describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('compiling the request validators before the server listens', () => {
  it('resolves only when every operation has its validators, the event loop turning between operations', async () => {
    const backend = await createBackend();
    const operationIds = backend.router.getOperations().map((operation) => operation.operationId!);
    const compiled = () => Object.keys((backend.validator as unknown as { requestValidators: Record<string, unknown> }).requestValidators);
    expect(compiled()).toHaveLength(0);

    let turns = 0;
    let turning = true;
    const turn = () => {
      turns += 1;
      if (turning) setImmediate(turn);
    };
    setImmediate(turn);
    await precompileValidators(backend);
    turning = false;

    expect(compiled().sort()).toEqual([...operationIds].sort());
    // One operation a turn: other work (the job runner) runs between them.
    expect(turns).toBeGreaterThanOrEqual(operationIds.length);
  });
});
