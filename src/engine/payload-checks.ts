// Large payloadSchemas are compiled, and payloads checked against them, on a thread of their own
// (payload-check-thread.ts): ajv compiles a schema in one go, and V8 the code ajv writes the first
// time it runs, which for a schema of 900 properties held the event loop 150–200 ms at each save
// and at the first trigger after it. Small schemas, nearly all of them, stay on the event loop,
// where a check costs no message between threads.
import type { Worker } from 'node:worker_threads';
import type { ErrorObject } from 'ajv';
import type { ErrorDetail } from '../contract.js';
import { startThread } from '../db/threads.js';

/** Schemas with more subschemas than this (once `$ref`s are followed)… */
export const THREADED_SCHEMAS = 100;
/** …or patterns that compile to more instructions than this together, are compiled and run on the thread. */
export const THREADED_PATTERN_SIZE = 10_000;

/** A check asked of the thread: a payload against a workflow version's schema, or (no payload) whether a schema compiles. */
export interface CheckAsked {
  id: number;
  /** The workflow version (its id and updatedAt): the thread keeps its compiled schema by it. */
  key: string;
  schema: object;
  payload?: unknown;
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
}

class PayloadChecks {
  private worker: Worker | undefined;
  private lastId = 0;
  private readonly waiting = new Map<number, { resolve: (answered: CheckAnswered) => void; reject: (err: Error) => void }>();

  /** The payload checked against the schema of workflow version `key`. */
  check(key: string, schema: object, payload: unknown, patternChars: number): Promise<CheckAnswered> {
    return this.ask({ key, schema, payload, patternChars });
  }

  /** Why a schema cannot be used (compilePayloadSchema's problems), [] when it can. */
  async problems(schema: object): Promise<ErrorDetail[]> {
    return (await this.ask({ key: '', schema, patternChars: 0 })).problems ?? [];
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
