// Large payloadSchemas are compiled, and payloads checked against them, on a thread of their own
// (payload-check-thread.ts): ajv compiles a schema in one go, and V8 the code ajv writes the first
// time it runs, which for a schema of hundreds of properties held the event loop at each save and
// at the first trigger after it. Small schemas, nearly all of them, stay on the event loop, where a
// check costs no message between threads. Templates are compiled on the thread too when they are
// many (THREADED_TEMPLATE_CHARS), at a workflow's save and before a job first renders them:
// Handlebars' compile costs time for each name and parameter in a `{{…}}`, and a workflow (or a
// trigger's overrides) may hold thousands.
import { createHash } from 'node:crypto';
import type { ResourceLimits, Worker } from 'node:worker_threads';
import type { ErrorObject } from 'ajv';
import type { ErrorDetail } from '../contract.js';
import type { MessageTemplate, Precompiled, TemplateField } from './templates.js';
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
 * subschemas, yet compiling and checking them holds the loop as long), are compiled and run on the thread.
 */
export const THREADED_SCHEMA_CHARS = 64 * 1024;

/**
 * Templates whose `{{…}}` hold more characters than this together (expressionChars) are compiled
 * on the thread, at a workflow's save and before a job renders a message's new templates: what
 * Handlebars' compile costs grows with the names and parameters inside them; fewer stay where
 * they are, as a message between threads would cost more.
 */
export const THREADED_TEMPLATE_CHARS = 400;

/**
 * A check asked of the thread: a payload against a workflow version's schema, (no payload) whether
 * a schema compiles, or (`templates`) whether a workflow's templates do.
 */
export interface CheckAsked {
  id: number;
  /** The workflow version (its id and updatedAt): the thread keeps its compiled schema by it. */
  key: string;
  /**
   * The schema, as JSON text, like the payload: a string crosses to the thread in one copy, where
   * an object is cloned piece by piece, far slower for many small parts than writing it. Left out
   * of a check once the thread has been sent it for `key`; the thread answers `unknown` if it has
   * let it go.
   */
  schema?: string;
  payload?: string;
  /** A workflow's templates, to be compiled as a save checks them (templateFieldProblems). */
  templates?: TemplateField[];
  /** A message's templates, to be compiled as render compiles them, for render's cache (precompiled). */
  compile?: MessageTemplate[];
  /** What the request may still spend on patterns (CheckBudget). */
  patternChars: number;
}

export interface CheckAnswered {
  id: number;
  /** Why the schema, or the templates, cannot be used, when they cannot (a save's answer: [] when they can). */
  problems?: ErrorDetail[];
  /** The templates of `compile`, in order. */
  precompiled?: Precompiled[];
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
  /** Not the thread's: the thread died twice on this check, the second time running it alone: why. */
  stopped?: string;
}

/**
 * How long the thread may work without answering while checks wait on it: then it is stopped and
 * started again (a check within the request bounds takes well under a second).
 */
export const CHECK_TIMEOUT_MS = 5_000;
/**
 * The thread's heap, a backstop: what it holds is bounded already (KEPT_SCHEMAS compiled schemas
 * of bounded size, and one request's payload). Past it Node stops the thread,
 * though for some allocations it aborts the process instead (nodejs/node#47224).
 */
export const CHECK_THREAD_LIMITS: ResourceLimits = { maxOldGenerationSizeMb: 512 };

interface Waiting {
  asked: CheckAsked;
  /** The schema, sent with a retry though the check left it out: a new thread has none compiled. */
  schema: object;
  /** In flight once already when the thread died: sent again alone, and not a third time. */
  retried: boolean;
  resolve: (answered: CheckAnswered) => void;
}

/**
 * When the thread dies (out of memory, past the timeout, a crash), it is started again, and each
 * check that was in flight is sent again once, alone: other tenants' checks that happened to be in
 * flight are answered, and a check that kills the thread again, alone, is answered `stopped`.
 */
export class PayloadChecks {
  private worker: Worker | undefined;
  private lastId = 0;
  /** Checks not yet sent: new ones wait while a retried check runs alone. */
  private readonly queued: Waiting[] = [];
  private readonly inFlight = new Map<number, Waiting>();
  private watchdog: NodeJS.Timeout | undefined;
  /**
   * Workflow versions whose schema the thread has been sent. It keeps fewer (and none that does not
   * compile): a schema it has let go is asked for (`unknown`) and sent again.
   */
  private readonly sent = new BoundedMap<string, true>(2 * KEPT_SCHEMAS);
  /**
   * Checks that stopped the thread twice, by fingerprint, with why: asked again within
   * `rememberStoppedMs` (a client retrying its request), one is answered at once, instead of
   * stopping the thread twice more while the other tenants' checks wait behind it, one at a time.
   * Not for ever: the second stop, alone, makes the check the likely cause, not a certain one.
   */
  private readonly stoppers = new BoundedMap<string, { why: string; until: number }>(STOPPERS_KEPT);

  constructor(
    private readonly limits: { timeoutMs: number; resourceLimits: ResourceLimits; rememberStoppedMs: number } = {
      timeoutMs: CHECK_TIMEOUT_MS,
      resourceLimits: CHECK_THREAD_LIMITS,
      rememberStoppedMs: REMEMBER_STOPPED_MS,
    },
  ) {}

  /** The payload checked against the schema of workflow version `key`. */
  async check(key: string, schema: object, payload: unknown, patternChars: number): Promise<CheckAnswered> {
    const payloadText = JSON.stringify(payload);
    const stopped = this.stoppedBefore({ key, payload: payloadText });
    if (stopped !== undefined) return { id: 0, stopped };
    if (this.sent.get(key)) {
      const answered = await this.ask({ key, payload: payloadText, patternChars }, schema);
      if (!answered.unknown) return answered;
    }
    this.sent.set(key, true);
    return this.ask({ key, schema: JSON.stringify(schema), payload: payloadText, patternChars }, schema);
  }

  /** Why a schema cannot be used (compilePayloadSchema's problems), [] when it can. */
  async problems(schema: object): Promise<ErrorDetail[]> {
    const asked = { key: '', schema: JSON.stringify(schema), patternChars: 0 };
    const stopped = this.stoppedBefore(asked);
    const answered = stopped !== undefined ? { id: 0, stopped } : await this.ask(asked, schema);
    if (answered.stopped !== undefined) return [{ field: 'body/payloadSchema', message: `could not be compiled: ${answered.stopped}` }];
    return answered.problems ?? [];
  }

  /** The problems of a workflow's templates (templateFieldProblems), found on the thread. */
  async templateProblems(templates: TemplateField[]): Promise<ErrorDetail[]> {
    const asked = { key: '', templates, patternChars: 0 };
    const stopped = this.stoppedBefore(asked);
    const answered = stopped !== undefined ? { id: 0, stopped } : await this.ask(asked, {});
    if (answered.stopped !== undefined) return [{ field: 'body/steps', message: `could not be compiled: ${answered.stopped}` }];
    return answered.problems ?? [];
  }

  /** A message's templates compiled on the thread (precompiled), in order; or why they could not be. */
  async precompile(templates: MessageTemplate[]): Promise<{ made: Precompiled[] } | { stopped: string }> {
    const asked = { key: '', compile: templates, patternChars: 0 };
    const stopped = this.stoppedBefore(asked);
    const answered = stopped !== undefined ? { id: 0, stopped } : await this.ask(asked, {});
    if (answered.stopped !== undefined) return { stopped: answered.stopped };
    return { made: answered.precompiled ?? [] };
  }

  private ask(asked: Omit<CheckAsked, 'id'>, schema: object): Promise<CheckAnswered> {
    return new Promise<CheckAnswered>((resolve) => {
      this.queued.push({ asked: { ...asked, id: ++this.lastId }, schema, retried: false, resolve });
      this.pump();
    }).then((answered) => {
      if (answered.failed !== undefined) throw new Error(`payload check failed: ${answered.failed}`);
      return answered;
    });
  }

  /** Sends what may go: everything, but a retried check only alone, and nothing beside it. */
  private pump(): void {
    while (this.queued.length > 0) {
      const next = this.queued[0]!;
      const alone = [...this.inFlight.values()].some((waiting) => waiting.retried);
      if (alone || (next.retried && this.inFlight.size > 0)) return;
      let worker: Worker;
      try {
        worker = this.worker ??= this.start();
      } catch (err) {
        // No thread to ask: every check waiting fails (a 500 whose cause is logged), none hangs.
        for (const waiting of this.queued.splice(0)) waiting.resolve({ id: waiting.asked.id, failed: `the payload check thread could not start: ${(err as Error).message}` });
        return;
      }
      this.queued.shift();
      this.inFlight.set(next.asked.id, next);
      const { asked } = next;
      worker.postMessage(next.retried && asked.key !== '' && asked.schema === undefined ? { ...asked, schema: JSON.stringify(next.schema) } : asked);
      this.watchdog ??= this.watch(worker);
    }
  }

  /** Stops the thread if it answers nothing for the timeout while checks wait on it. */
  private watch(worker: Worker): NodeJS.Timeout {
    const { timeoutMs } = this.limits;
    const timer = setTimeout(() => {
      this.gone(worker, `took more than ${timeoutMs / 1000} s`);
      void worker.terminate();
    }, timeoutMs);
    // The requests waiting keep the process alive; this need not.
    timer.unref();
    return timer;
  }

  private answered(worker: Worker, answered: CheckAnswered): void {
    const waiting = this.worker === worker ? this.inFlight.get(answered.id) : undefined;
    if (!waiting) return;
    this.inFlight.delete(answered.id);
    clearTimeout(this.watchdog);
    this.watchdog = this.inFlight.size > 0 ? this.watch(worker) : undefined;
    waiting.resolve(answered);
    this.pump();
  }

  /** The thread is gone: its checks in flight are sent again once, alone, on a new thread. */
  private gone(worker: Worker, why: string): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    clearTimeout(this.watchdog);
    this.watchdog = undefined;
    this.sent.clear();
    const again: Waiting[] = [];
    for (const waiting of this.inFlight.values()) {
      if (!waiting.retried) {
        again.push({ ...waiting, retried: true });
        continue;
      }
      const stopped = `the check ${why}, twice, the second time alone on a new thread`;
      this.stoppers.set(fingerprint(waiting.asked), { why: stopped, until: Date.now() + this.limits.rememberStoppedMs });
      waiting.resolve({ id: waiting.asked.id, stopped });
    }
    this.inFlight.clear();
    this.queued.unshift(...again);
    this.pump();
  }

  /** Why this check stopped the thread before, if it did (nothing is hashed while none has). */
  private stoppedBefore(asked: Pick<CheckAsked, 'key' | 'payload' | 'schema' | 'templates' | 'compile'>): string | undefined {
    if (this.stoppers.size === 0) return undefined;
    const key = fingerprint(asked);
    const stopped = this.stoppers.get(key);
    if (stopped && stopped.until > Date.now()) return stopped.why;
    if (stopped) this.stoppers.delete(key);
    return undefined;
  }

  private start(): Worker {
    const worker = startThread(new URL('./payload-check-thread', import.meta.url), { resourceLimits: this.limits.resourceLimits });
    // It never keeps the process alive: an answer under way belongs to a request, which does.
    worker.unref();
    worker.on('message', (answered: CheckAnswered) => this.answered(worker, answered));
    worker.on('error', (err: Error & { code?: string }) => {
      const memory = err.code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.gone(worker, memory ? `ran out of the ${this.limits.resourceLimits.maxOldGenerationSizeMb} MB of memory it may use` : `stopped the check thread (${err.message})`);
    });
    worker.on('exit', (code) => this.gone(worker, `stopped the check thread (exit code ${code})`));
    return worker;
  }
}

/** How many checks that stopped the thread are remembered, and for how long. */
const STOPPERS_KEPT = 100;
export const REMEMBER_STOPPED_MS = 10 * 60_000;

/** A check's identity: its workflow version and payload, a save's schema or templates, or a message's templates. */
function fingerprint(asked: Pick<CheckAsked, 'key' | 'payload' | 'schema' | 'templates' | 'compile'>): string {
  const hash = createHash('sha256');
  if (asked.key) hash.update(asked.key).update('\0').update(asked.payload ?? '');
  else if (asked.templates) for (const { field, source } of asked.templates) hash.update('\0').update(field).update('\0').update(source);
  else if (asked.compile) for (const { source, escape } of asked.compile) hash.update(escape ? '\0e' : '\0n').update(source);
  else hash.update(asked.schema ?? '');
  return hash.digest('base64');
}

/** The process's thread for large payloadSchemas, started when first needed. */
export const payloadChecks = new PayloadChecks();
