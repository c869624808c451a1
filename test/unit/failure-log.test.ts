import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, FailureLog } from '../../src/logger.js';

function logged() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', new Writable({ write: (chunk, _encoding, done) => done(void lines.push(JSON.parse(String(chunk)))) }));
  return { lines, logger };
}

describe('FailureLog', () => {
  it('logs a run of failures as its first, one line a minute while it lasts, and its end', () => {
    const { lines, logger } = logged();
    let now = 0;
    const log = new FailureLog(logger, 'claiming failed', { lane: 'in_app' }, () => now);
    expect(log.failed(new Error('connection refused'))).toBe(1);
    for (let i = 0; i < 100; i++) {
      now += 500;
      log.failed(new Error('connection refused'));
    }
    // 50 s in: still only the first.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, msg: 'claiming failed', lane: 'in_app', err: { message: 'connection refused' } });
    for (let i = 0; i < 20; i++) {
      now += 500;
      log.failed(new Error('connection reset'));
    }
    // 60 s in: the sum so far, with the last error's message.
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ level: 50, msg: 'claiming failed; still failing', lane: 'in_app', failures: 121, sinceMs: 60_000, last: 'connection reset' });
    now += 1_000;
    log.succeeded();
    expect(lines[2]).toMatchObject({ level: 30, msg: 'claiming failed earlier; it works again', failures: 121, ms: 61_000 });
    log.succeeded();
    expect(lines).toHaveLength(3);
    // A new run is logged again, first failure in full.
    expect(log.failed('gone again')).toBe(1);
    expect(lines[3]).toMatchObject({ level: 50, msg: 'claiming failed', err: 'gone again' });
  });

  it('starts a new run after a minute without failures, for tasks that never say they worked', () => {
    const { lines, logger } = logged();
    let now = 0;
    const log = new FailureLog(logger, 'database driver warning', {}, () => now);
    log.failed('Connection Error: terminated');
    now += 10_000;
    expect(log.failed('Connection Error: terminated')).toBe(2);
    now += 60_000;
    expect(log.failed('Acquire connection error: refused')).toBe(1);
    expect(lines.map((line) => [line.msg, line.err ?? line.failures])).toEqual([
      ['database driver warning', 'Connection Error: terminated'],
      ['database driver warning earlier; none since', 2],
      ['database driver warning', 'Acquire connection error: refused'],
    ]);
    // A run of one ended by the quiet gap says nothing more: its one failure was logged in full.
    now += 60_000;
    log.failed('again');
    expect(lines.map((line) => line.msg)).toHaveLength(4);
  });
});
