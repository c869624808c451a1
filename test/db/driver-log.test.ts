// knex's own warnings go to the process's log as one line each, a run of them logged once, not to
// the console with a stack apiece: a database that refuses connections (nothing listens on port 1).
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createDb } from '../../src/db/knex.js';
import { driverLog } from '../../src/db/driver-log.js';
import { createLogger } from '../../src/logger.js';

describe('the database driver’s warnings', () => {
  it('are logged once a run, on one line each, and not written to the console', async () => {
    const lines: Array<{ level: number; msg: string; source?: string; err?: unknown }> = [];
    const logger = createLogger('info', new Writable({ write: (chunk, _encoding, done) => done(void lines.push(JSON.parse(String(chunk)))) }));
    const console = vi.spyOn(globalThis.console, 'warn');
    const db = createDb('postgres://herald:herald@127.0.0.1:1/herald', { logger });
    try {
      for (let i = 0; i < 5; i++) await expect(db.raw('SELECT 1')).rejects.toThrow(/ECONNREFUSED/);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ level: 50, msg: 'database driver: acquire connection error', source: 'knex' });
      expect(String(lines[0].err)).toMatch(/^Acquire connection error: .*ECONNREFUSED/);
      expect(String(lines[0].err)).not.toContain('\n');
      expect(console).not.toHaveBeenCalled();
    } finally {
      console.mockRestore();
      await db.destroy();
    }
  });

  it('logs any other message as it comes, at warn, whole but for its stack', () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = createLogger('info', new Writable({ write: (chunk, _encoding, done) => done(void lines.push(JSON.parse(String(chunk)))) }));
    const log = driverLog(logger)!;
    log.warn!('migration file "20261206_05_send_gate.js" failed');
    log.warn!('migration failed with error: column "send_gate" already exists\n    at Parser.parseErrorMessage (parser.js:1:1)\n    at Socket.emit (node:events:1:1)');
    expect(lines).toEqual([
      expect.objectContaining({ level: 40, msg: 'migration file "20261206_05_send_gate.js" failed' }),
      expect.objectContaining({ level: 40, msg: 'migration failed with error: column "send_gate" already exists' }),
    ]);
  });
});
