// The thread of payload-checks.ts: compiles large payloadSchemas and checks payloads against them,
// off the API's event loop (ajv compiles a schema in one go, and V8 the code ajv writes the first
// time it runs, holding every other request meanwhile); and compiles templates when they are many,
// at a workflow's save and, precompiled, for render's cache.
import { parentPort } from 'node:worker_threads';
import { firstThenAll, PatternBudgetSpent, validateWithin } from '../json-schema.js';
import { BoundedMap } from '../bounded-map.js';
import { compiledPayloadSchema, templateFieldProblems } from './workflow-rules.js';
import { precompiled } from './templates.js';
import { KEPT_SCHEMAS, type CheckAsked, type CheckAnswered } from './payload-checks.js';

const port = parentPort!;

type Compiled = Exclude<Awaited<ReturnType<typeof compiledPayloadSchema>>, { problems: unknown }>;

// By workflow version, as the main thread's cache (trigger.ts).
const validators = new BoundedMap<string, Compiled>(KEPT_SCHEMAS);

async function compiled(key: string, schema: object, allErrors: boolean): Promise<Compiled | { problems: NonNullable<CheckAnswered['problems']> }> {
  const known = validators.get(key);
  if (known) return known;
  const made = await compiledPayloadSchema(schema, { allErrors });
  if (key !== '' && !('problems' in made)) validators.set(key, made);
  return made;
}

async function answer(asked: CheckAsked): Promise<CheckAnswered> {
  if (asked.compile) return { id: asked.id, precompiled: asked.compile.map(precompiled) };
  if (asked.templates) return { id: asked.id, problems: templateFieldProblems(asked.templates) };
  // A save: whether the schema compiles, listing every problem (allErrors, as on the main thread).
  const schema = asked.schema === undefined ? undefined : (JSON.parse(asked.schema) as object);
  if (asked.payload === undefined) {
    const made = await compiled('', schema ?? {}, true);
    return { id: asked.id, problems: 'problems' in made ? made.problems : [] };
  }
  if (schema === undefined && !validators.get(asked.key)) return { id: asked.id, unknown: true };
  const made = await compiled(asked.key, schema ?? {}, false);
  if ('problems' in made) return { id: asked.id, problems: made.problems };
  const budget = { patternChars: asked.patternChars, schemaChecks: 0 };
  try {
    const payload: unknown = JSON.parse(asked.payload);
    const errors = validateWithin(budget, () => firstThenAll(made.first, made.listAll, payload));
    return { id: asked.id, errors: errors ?? [], patternChars: budget.patternChars };
  } catch (err) {
    if (!(err instanceof PatternBudgetSpent)) return { id: asked.id, failed: err instanceof Error ? err.message : String(err) };
    return { id: asked.id, spent: err.message, patternChars: budget.patternChars };
  }
}

port.on('message', (asked: CheckAsked) => {
  answer(asked).then(
    (answered) => port.postMessage(answered),
    (err: unknown) => port.postMessage({ id: asked.id, failed: err instanceof Error ? err.message : String(err) } satisfies CheckAnswered),
  );
});
