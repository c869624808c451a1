// The few files Herald serves (the contract, the docs page, the example inbox) are answered from
// memory, read again only when the file changes. express's sendFile streams each answer from a
// file handle of its own, and an answer queued behind others on a connection (requests sent one
// after another without waiting) kept its handle and buffer for ever once the client left: 500
// requests in one write held 500 handles and 70 MB. A buffer in memory is shared by every answer
// and holds nothing of the system's.
import fs from 'node:fs';
import type { Response } from 'express';

interface Loaded {
  mtimeMs: number;
  size: number;
  body: Buffer;
  etag: string;
}

const loaded = new Map<string, Loaded>();

/** The file's bytes as they are now: from memory unless it changed since it was read. Throws as fs does. */
function current(file: string): Loaded {
  const stat = fs.statSync(file);
  const known = loaded.get(file);
  if (known && known.mtimeMs === stat.mtimeMs && known.size === stat.size) return known;
  const body = fs.readFileSync(file);
  // Weak, from what changes the file; express would hash the whole body for every answer.
  const fresh = { mtimeMs: stat.mtimeMs, size: stat.size, body, etag: `W/"${body.length.toString(16)}-${Math.floor(stat.mtimeMs).toString(16)}"` };
  loaded.set(file, fresh);
  return fresh;
}

/**
 * Answers `file` in `type` (`res.type`'s names: 'html', 'application/yaml'), with an ETag and a 304
 * to a request that has it; calls `failed` when the file cannot be read.
 */
export function sendFileFromMemory(res: Response, file: string, type: string, failed: (err: unknown) => void): void {
  let answer: Loaded;
  try {
    answer = current(file);
  } catch (err) {
    return failed(err);
  }
  res.type(type).set('ETag', answer.etag).send(answer.body);
}
