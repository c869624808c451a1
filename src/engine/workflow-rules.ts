// The rules a workflow must satisfy beyond its schema, checked when it is saved so that a broken
// workflow is a 422 on save rather than a failed send later.
import type { ErrorDetail } from '../http/errors.js';
import { createAjv } from '../http/api.js';
import type { Step } from '../db/repos/workflows.js';
import { templateProblem } from './templates.js';

/** Templates are every string field of a step's `template`, except the plain sender name. */
const PLAIN_TEMPLATE_FIELDS = new Set(['senderName']);

/** "Comment added!" → "comment-added": the workflowId a name gives when none is chosen. */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 100)
    .replace(/^-+|-+$/g, '');
}

/**
 * Gives every step its stepId (from its type, numbered when the type repeats) and `active` flag,
 * and lists what is wrong: repeated stepIds, templates that do not compile, conditions whose
 * value does not fit their operator.
 */
export function normalizeSteps(steps: Step[]): { steps: Step[]; problems: ErrorDetail[] } {
  const problems: ErrorDetail[] = [];
  const taken = new Set(steps.map((step) => step.stepId).filter(Boolean));
  const seen = new Set<string>();
  const normalized = steps.map((step, index) => {
    const at = `body/steps/${index}`;
    let stepId = step.stepId;
    if (!stepId) {
      const base = step.type.replace(/_/g, '-');
      stepId = base;
      for (let n = 2; taken.has(stepId); n++) stepId = `${base}-${n}`;
      taken.add(stepId);
    }
    if (seen.has(stepId)) problems.push({ field: `${at}/stepId`, message: `${stepId} is used by an earlier step` });
    seen.add(stepId);

    if ('template' in step) {
      for (const [field, source] of Object.entries(step.template)) {
        if (typeof source !== 'string' || PLAIN_TEMPLATE_FIELDS.has(field)) continue;
        const problem = templateProblem(source);
        if (problem) problems.push({ field: `${at}/template/${field}`, message: `does not compile: ${problem}` });
      }
    }
    (step.conditions ?? []).forEach((condition, c) => {
      const field = `${at}/conditions/${c}/value`;
      const hasValue = condition.value !== undefined;
      if (condition.operator === 'in' || condition.operator === 'notIn') {
        if (!Array.isArray(condition.value)) problems.push({ field, message: `must be an array for ${condition.operator}` });
      } else if (condition.operator === 'exists' || condition.operator === 'notExists') {
        if (hasValue) problems.push({ field, message: `must be left out for ${condition.operator}` });
      } else if (!hasValue) {
        problems.push({ field, message: `is required for ${condition.operator}` });
      }
    });
    return { ...step, stepId, active: step.active ?? true } as Step;
  });
  return { steps: normalized, problems };
}

/** Why a payloadSchema cannot be used as a JSON Schema; undefined when it compiles. */
export function payloadSchemaProblem(schema: object): ErrorDetail | undefined {
  try {
    createAjv().compile(schema);
    return undefined;
  } catch (err) {
    return { field: 'body/payloadSchema', message: `is not a valid JSON Schema: ${err instanceof Error ? err.message : String(err)}` };
  }
}
