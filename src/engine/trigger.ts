// POST /events/trigger: a trigger is checked whole before anything is stored, and accepted in one
// atomic write with its notifications and first jobs (a transactional outbox): an acknowledged
// trigger is never lost, a rejected one leaves nothing behind. On SQLite, triggers that arrive
// together are committed together (db/group-commit.ts), each still answered only once committed.
import { v7 as timeOrderedUuid } from 'uuid';
import type { ErrorObject } from 'ajv';
import type { Deps } from '../deps.js';
import type { Auth, Schemas } from '../contract.js';
import { conflict, unprocessable } from '../errors.js';
import type { ErrorDetail } from '../contract.js';
import { firstThenAll, newCheckBudget, PatternBudgetSpent, SCHEMA_CHECK_BUDGET, validateWithin, type CheckBudget, type Validate } from '../json-schema.js';
import { checkedOffLoop, compiledPayloadSchema, schemaChecksOf, schemaWeight, type SchemaSizes } from './workflow-rules.js';
import { payloadChecks } from './payload-checks.js';
import { isUniqueViolation } from '../db/errors.js';
import { writeTransaction } from '../db/group-commit.js';
import type { StoredWorkflow } from '../db/repos/workflows.js';
import { findSubscriber, subscriberKeys, upsertSubscriber } from '../db/repos/subscribers.js';
import { holdTopics, topicIdsByKey } from '../db/repos/topics.js';
import { loneTriggerStore, type TriggerStore } from '../db/trigger-store.js';
import { eventRow, insertEvent, type EventRecord, type WorkflowSnapshot } from '../db/repos/events.js';
import { storeWorkflowSnapshot, workflowSnapshot } from '../db/repos/workflow-snapshots.js';
import { insertJobs, jobRow } from '../db/repos/jobs.js';
import { notificationRow } from '../db/repos/notifications.js';
import { newId } from '../ids.js';
import { parseInstant, valueAt } from './durations.js';
import { timezoneProblem } from './subscribers.js';
import { overridesProblem } from './templates.js';
import { plannedStart, startNotifications, type SubscriberRef } from './schedule.js';
import { fanoutShards } from '../db/fanout-shards.js';
import { BoundedMap } from '../bounded-map.js';

type TriggerRequest = Schemas['TriggerRequest'];
type TriggerResult = Schemas['TriggerResult'];
type InlineSubscriber = Schemas['SubscriberCreate'];

/** The most of a payload's problems a 422 names (a long array can have one an item). */
export const MAX_PAYLOAD_DETAILS = 100;

// Compiled payload schemas, per workflow version, or why a stored one cannot be used (a refusal is
// remembered too, so that triggers to such a workflow do not compile it again each time).
const payloadValidators = new BoundedMap<string, PayloadValidator | ErrorDetail>(500);

/**
 * A payload schema compiled to stop at the first error, and (when a small payload fails it) to list
 * them all; with the schema it was compiled from and its nodes' sizes, which count a payload's checks.
 * A large one (checkedOffLoop) is compiled and run on the payload check thread instead (`threaded`).
 */
type PayloadValidator = { schema: object; sizes: SchemaSizes } & ({ first: Validate; listAll: () => Validate } | { threaded: true; key: string });

/** A workflow's stored payloadSchema that today's rules refuse (workflow-rules.ts): each trigger is told so. */
function refusalOf([problem]: ErrorDetail[]): ErrorDetail {
  const why = `${problem.field.replace(/^body\//, '')} ${problem.message}`;
  return { field: 'body/name', message: `the workflow's payloadSchema cannot be used (${why}); save the workflow again with a supported schema` };
}

/** The workflow's payloadSchema (`schema`) compiled, or why it cannot be used. */
async function payloadValidatorOf(workflow: StoredWorkflow, schema: object): Promise<PayloadValidator | ErrorDetail> {
  const cacheKey = `${workflow.id}@${workflow.updatedAt}`;
  const known = payloadValidators.get(cacheKey);
  if (known) return known;
  let validate: PayloadValidator | ErrorDetail;
  const weight = schemaWeight(schema);
  if (!('problems' in weight) && checkedOffLoop(weight)) {
    validate = { schema, sizes: weight.sizes, threaded: true, key: cacheKey };
  } else {
    // A schema saved before today's rules (workflow-rules.ts) is held to them here: refused, not a 500 or a stall.
    const checked = await compiledPayloadSchema(schema, { allErrors: false });
    validate = 'problems' in checked ? refusalOf(checked.problems) : { schema, ...checked };
  }
  payloadValidators.set(cacheKey, validate);
  return validate;
}

/** The payload's errors against `validator`, charged to `budget`; a problem of their own when the budget runs out. */
async function payloadErrors(validator: PayloadValidator, payload: Record<string, unknown>, budget: CheckBudget): Promise<ErrorObject[] | ErrorDetail> {
  const { schema } = validator;
  if ('threaded' in validator) {
    const answered = await payloadChecks.check(validator.key, schema, payload, budget.patternChars);
    if (answered.problems) {
      const refusal = refusalOf(answered.problems);
      payloadValidators.set(validator.key, refusal);
      return refusal;
    }
    // Not remembered as the schema's refusal: it is this payload (or a thread under pressure).
    if (answered.stopped !== undefined) return { field: 'body/payload', message: `could not be checked against the payloadSchema: ${answered.stopped}` };
    budget.patternChars = answered.patternChars!;
    return answered.spent === undefined ? answered.errors! : { field: 'body/payload', message: answered.spent };
  }
  try {
    return validateWithin(budget, () => firstThenAll(validator.first, validator.listAll, payload)) ?? [];
  } catch (err) {
    if (!(err instanceof PatternBudgetSpent)) throw err;
    return { field: 'body/payload', message: err.message };
  }
}

/** The payload's problems against the workflow's payloadSchema (`validate`), then its delay steps'. */
async function payloadProblems(workflow: StoredWorkflow, validate: PayloadValidator | ErrorDetail, payload: Record<string, unknown>, budget: CheckBudget): Promise<ErrorDetail[]> {
  if (!('schema' in validate)) return [validate];
  const checks = schemaChecksOf(validate.schema, validate.sizes, payload, budget.schemaChecks);
  if (checks > budget.schemaChecks) {
    const message = `would need more than ${SCHEMA_CHECK_BUDGET.toLocaleString('en')} checks against the payloadSchema (each value counts every schema that may apply to it), their budget for one request (a bulk request's events share it)`;
    return [{ field: 'body/payload', message }];
  }
  budget.schemaChecks -= checks;
  const errors = await payloadErrors(validate, payload, budget);
  if (!Array.isArray(errors)) return [errors];
  const problems = errors.slice(0, MAX_PAYLOAD_DETAILS).map((error): ErrorDetail => {
    const missing = error.keyword === 'required' ? `/${String(error.params.missingProperty)}` : '';
    return { field: `body/payload${error.instancePath}${missing}`, message: missing ? 'is required' : (error.message ?? 'is invalid') };
  });
  problems.push(...delayProblems(workflow, payload));
  return problems;
}

/** The payload's problems for the workflow's delay steps: a time each one that waits until a payload's time needs. */
function delayProblems(workflow: StoredWorkflow, payload: Record<string, unknown>): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  for (const step of workflow.steps) {
    if (step.type === 'delay' && step.active !== false && step.delayPath && !parseInstant(valueAt(payload, step.delayPath))) {
      problems.push({ field: `body/payload/${step.delayPath.replace(/\./g, '/')}`, message: `must be an ISO 8601 time with a zone, for the delay step ${step.stepId}` });
    }
  }
  return problems;
}

/**
 * A trigger's recipients and actor, sorted: subscribers named by id, subscribers given inline (to
 * create or update) and topic keys, each with where it stands in the request; and the subscriber
 * ids of `to` (named or inline) in their order, once each: those notified directly.
 */
export function recipientsOf(request: TriggerRequest) {
  const at = (i: number) => (Array.isArray(request.to) ? `body/to/${i}` : 'body/to');
  const named = new Map<string, string>();
  const inline: Array<{ subscriber: InlineSubscriber; field: string }> = [];
  const topicKeys = new Map<string, string>();
  const direct = new Set<string>();
  (Array.isArray(request.to) ? request.to : [request.to]).forEach((recipient, i) => {
    if (typeof recipient === 'string') {
      named.set(recipient, at(i));
      direct.add(recipient);
    } else if ('type' in recipient) topicKeys.set(recipient.topicKey, at(i));
    else {
      inline.push({ subscriber: recipient, field: at(i) });
      direct.add(recipient.subscriberId);
    }
  });
  if (typeof request.actor === 'string') named.set(request.actor, 'body/actor');
  else if (request.actor) inline.push({ subscriber: request.actor, field: 'body/actor' });
  return { named, inline, topicKeys, direct };
}

/**
 * What a trigger's event keeps of its workflow: the snapshot it names (db/repos/workflow-snapshots.ts)
 * and its text, made once a workflow read (a bulk request reads each of its workflows once), and
 * stored once for all the events that share it: a keyed bulk request's events, in one transaction,
 * would each have sent it again.
 */
interface Snapshot {
  workflow: WorkflowSnapshot;
  body: string;
  digest: string;
  stored?: Promise<void>;
}

const snapshots = new WeakMap<StoredWorkflow, Snapshot>();

function snapshotOf(environmentId: string, stored: StoredWorkflow): Snapshot {
  let snapshot = snapshots.get(stored);
  if (!snapshot) {
    const workflow: WorkflowSnapshot = {
      id: stored.id,
      workflowId: stored.workflowId,
      name: stored.name,
      critical: stored.critical,
      preferenceSettings: stored.preferenceSettings,
      steps: stored.steps,
      tags: stored.tags,
    };
    snapshots.set(stored, (snapshot = { workflow, ...workflowSnapshot(environmentId, workflow) }));
  }
  return snapshot;
}

/**
 * Checks and stores one trigger. `store` and `budget` are shared by the events of one bulk
 * request: its reads, and its payloads' budget for checking them (json-schema.ts).
 */
export async function trigger(
  deps: Deps,
  auth: Auth,
  request: TriggerRequest,
  store?: TriggerStore,
  budget: CheckBudget = newCheckBudget(),
): Promise<TriggerResult> {
  const { db, clock } = deps;
  const env = auth.environmentId;
  // Sort the recipients: ids that must exist, inline subscribers to create or update, topics.
  const { named, inline: given, topicKeys, direct: directIds } = recipientsOf(request);
  const inline = new Map(given.map(({ subscriber }) => [subscriber.subscriberId, subscriber]));
  const mustExist = [...named.keys()].filter((id) => !inline.has(id));
  const { read, write } = store ?? loneTriggerStore(db, env);
  const { workflow, keys: existing } = await read(request.name, mustExist);
  if (!workflow) throw unprocessable(`Workflow ${request.name} not found`, [{ field: 'body/name', message: `${request.name} is not a workflow` }]);
  if (!workflow.active) return { acknowledged: true, status: 'trigger_not_active' };
  if (workflow.steps.length === 0) return { acknowledged: true, status: 'no_workflow_steps_defined' };
  if (!workflow.steps.some((step) => step.active !== false)) return { acknowledged: true, status: 'no_workflow_active_steps_defined' };

  const payload = (request.payload ?? {}) as Record<string, unknown>;
  // Without a schema there is nothing to wait for (nearly every trigger): no promise made.
  const schema = workflow.payloadSchema;
  const problems = schema ? await payloadProblems(workflow, await payloadValidatorOf(workflow, schema), payload, budget) : delayProblems(workflow, payload);

  const overridesOverBudget = overridesProblem(request.overrides);
  if (overridesOverBudget) problems.push({ field: 'body/overrides', message: overridesOverBudget });
  for (const { subscriber, field } of given) {
    const problem = timezoneProblem(subscriber.timezone, field);
    if (problem) problems.push(problem);
  }
  for (const id of mustExist) if (!existing.has(id)) problems.push({ field: named.get(id)!, message: `subscriber ${id} not found` });
  const topics = await topicIdsByKey(db, env, [...topicKeys.keys()]);
  for (const [key, field] of topicKeys) if (!topics.has(key)) problems.push({ field, message: `topic ${key} not found` });
  if (problems.length > 0) throw unprocessable(problems.map((p) => `${p.field} ${p.message}`).slice(0, 5).join('; '), problems);

  // Time-ordered, so that a new event's entry lands where the last one did in the transaction-id
  // indexes of events and notifications, rather than on a random page of each (half a trigger's writes).
  const transactionId = request.transactionId ?? timeOrderedUuid();
  const transactionIdTaken = () => conflict(`transactionId ${transactionId} was already used in this environment`);
  const now = clock.now();
  const snapshot = snapshotOf(env, workflow);
  await (snapshot.stored ??= storeWorkflowSnapshot(db, env, snapshot.digest, snapshot.body, now));
  const actorId = typeof request.actor === 'string' ? request.actor : request.actor?.subscriberId;
  const eventOf = (actor: EventRecord['actor']): EventRecord => ({
    id: newId(now.getTime()),
    environmentId: env,
    transactionId,
    workflow: snapshot.workflow,
    payload,
    overrides: (request.overrides ?? {}) as EventRecord['overrides'],
    actor,
    canceledAt: null,
    createdAt: now.toISOString(),
  });
  const directRecipients = (keys: Map<string, string>): SubscriberRef[] => [...directIds].map((id) => ({ key: keys.get(id)!, subscriberId: id }));
  try {
    // The common trigger (named subscribers, no topic, no digest first) is rows known in advance:
    // written all at once, in one statement on PostgreSQL.
    const event = inline.size === 0 && topics.size === 0 ? eventOf(actorId ? await findSubscriber(db, env, actorId) : undefined) : undefined;
    const plan = event && plannedStart(event, directRecipients(existing), now);
    if (event && plan) {
      const written = await write({
        event: eventRow(event, snapshot.digest),
        notifications: plan.notifications.map((notification) => notificationRow(notification, now)),
        jobs: plan.jobs.map((job) => jobRow(job, now)),
      });
      if (!written) throw transactionIdTaken();
    } else {
      await writeTransaction(db, async (trx) => {
        for (const subscriber of inline.values()) await upsertSubscriber(trx, env, subscriber, now);
        const keys = new Map([...existing, ...(await subscriberKeys(trx, env, [...inline.keys()]))]);
        const event = eventOf(actorId ? await findSubscriber(trx, env, actorId) : undefined);
        await insertEvent(trx, event, snapshot.digest);
        const direct = directRecipients(keys);
        await startNotifications(trx, event, direct, now);
        if (topics.size > 0) {
          // A topic deleted since it was looked up above would leave the fan-out nobody to notify.
          const held = await holdTopics(trx, [...topics.values()]);
          const gone = [...topics].filter(([, id]) => !held.has(id)).map(([key]) => ({ field: topicKeys.get(key)!, message: `topic ${key} not found` }));
          if (gone.length > 0) throw unprocessable(gone.map((p) => `${p.field} ${p.message}`).join('; '), gone);
          // Members are notified by the worker in batches; those named directly, and the actor, are left out.
          const exclude = direct.map((r) => r.key);
          if (actorId && keys.get(actorId)) exclude.push(keys.get(actorId)!);
          const topicIds = [...topics.values()];
          await insertJobs(
            trx,
            fanoutShards(db).map((shard) => ({
              environmentId: env,
              eventId: event.id,
              notificationId: null,
              kind: 'fanout' as const,
              type: 'fanout',
              status: 'pending' as const,
              runAt: now,
              state: { topicIds, exclude, shard },
            })),
            now,
          );
        }
      });
    }
  } catch (err) {
    if (isUniqueViolation(err)) throw transactionIdTaken();
    throw err;
  }
  return { acknowledged: true, status: 'processed', transactionId };
}
