// Large payloadSchemas are compiled, and payloads checked against them, on a thread of their own
// (payload-check-thread.ts): ajv compiles a schema in one go, and V8 the code ajv writes the first
// time it runs, which for a schema of 900 properties held the event loop 150–200 ms at each save
// and at the first trigger after it. Small schemas, nearly all of them, stay on the event loop,
// where a check costs no message between threads.
import type { Worker } from 'node:worker_threads';
import type { ErrorObject } from 'ajv';
import type { ErrorDetail } from '../contract.js';
import { startThread } from '../db/threads.js';
import { BoundedMap } from '../bounded-map.js';

/** Schemas with more subschemas than this (once `$ref`s are followed)… */
export const THREADED_SCHEMAS = 100;
/** Compiled schemas the thread keeps, by workflow version. */
export const KEPT_SCHEMAS = 100;

/** …or patterns that compile to more instructions than this together… */
export const THREADED_PATTERN_SIZE = 10_000;
/**
 * …or more characters of JSON than this (a long `enum` or a large `const` are data, not
 * subschemas: one of 95,000 numbers held the loop 160-215 ms at its save), are compiled and run on the thread.
 */
export const THREADED_SCHEMA_CHARS = 64 * 1024;

/** A check asked of the thread: a payload against a workflow version's schema, or (no payload) whether a schema compiles. */
export interface CheckAsked {
  id: number;
  /** The workflow version (its id and updatedAt): the thread keeps its compiled schema by it. */
  key: string;
  /**
   * The schema, as JSON text, like the payload: a string crosses to the thread in one copy, where
   * an object is cloned piece by piece (a payload of 19,000 small arrays: 20-30 ms, against 6 ms to
   * write it). Left out of a check once the thread has been sent it for `key`; the thread answers
   * `unknown` if it has let it go.
   */
  schema?: string;
  payload?: string;
  /** What the request may still spend on patterns (CheckBudget). */
  patternChars: number;
}

export interface CheckAnswered {
  id: number;
  /** Why the schema cannot be used, when it cannot (a save's answer: [] when it can). */
  problems?: ErrorDetail[];
  /** The payload's errors ([] when it passes). */
  errors?: ErrorObject[];
  /** What is left of the pattern budget after the check. */
  patternChars?: number;
  /** The pattern budget ran out: why. */
  spent?: string;
  /** The check failed unexpectedly: why. */
  failed?: string;
  /** The schema was left out, and the thread no longer has it compiled: ask again with it. */
  unknown?: boolean;
}

class PayloadChecks {
  private worker: Worker | undefined;
  private lastId = 0;
  private readonly waiting = new Map<number, { resolve: (answered: CheckAnswered) => void; reject: (err: Error) => void }>();
  /**
   * Workflow versions whose schema the thread has been sent. It keeps fewer (and none that does not
   * compile): a schema it has let go is asked for (`unknown`) and sent again.
   */
  private readonly sent = new BoundedMap<string, true>(2 * KEPT_SCHEMAS);

  /** The payload checked against the schema of workflow version `key`. */
  async check(key: string, schema: object, payload: unknown, patternChars: number): Promise<CheckAnswered> {
    const payloadText = JSON.stringify(payload);
    if (this.sent.get(key)) {
      const answered = await this.ask({ key, payload: payloadText, patternChars });
      if (!answered.unknown) return answered;
    }
    this.sent.set(key, true);
    return this.ask({ key, schema: JSON.stringify(schema), payload: payloadText, patternChars });
  }

  /** Why a schema cannot be used (compilePayloadSchema's problems), [] when it can. */
  async problems(schema: object): Promise<ErrorDetail[]> {
    return (await this.ask({ key: '', schema: JSON.stringify(schema), patternChars: 0 })).problems ?? [];
  }

  private ask(asked: Omit<CheckAsked, 'id'>): Promise<CheckAnswered> {
    const worker = (this.worker ??= this.start());
    const id = ++this.lastId;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.postMessage({ ...asked, id } satisfies CheckAsked);
    }).then((answered) => {
      const { failed } = answered as CheckAnswered;
      if (failed !== undefined) throw new Error(`payload check failed: ${failed}`);
      return answered as CheckAnswered;
    });
  }

  private start(): Worker {
    const worker = startThread(new URL('./payload-check-thread', import.meta.url));
    // It never keeps the process alive: an answer under way belongs to a request, which does.
    worker.unref();
    worker.on('message', (answered: CheckAnswered) => {
      const waiter = this.waiting.get(answered.id);
      this.waiting.delete(answered.id);
      waiter?.resolve(answered);
    });
    const gone = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      this.sent.clear();
      for (const waiter of this.waiting.values()) waiter.reject(err);
      this.waiting.clear();
    };
    worker.on('error', gone);
    worker.on('exit', (code) => gone(new Error(`the payload check thread exited (${code})`)));
    return worker;
  }
}

/** The process's thread for large payloadSchemas, started when first needed. */
export const payloadChecks = new PayloadChecks();
