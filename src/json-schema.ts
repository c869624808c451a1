import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { RE2JS } from 're2js';

const addFormats = ajvFormats.default;

/**
 * JSON Schema 2020-12 (OpenAPI 3.1's dialect) with formats, every error, and discriminated steps: the
 * one validator setup for the contract (http/) and, through `createTenantAjv`, for the schemas
 * tenants send (engine/).
 */
export function createAjv(options: object = {}): Ajv2020 {
  const ajv = new Ajv2020({ ...options, strict: false, allErrors: true, discriminator: true });
  addFormats(ajv);
  return ajv;
}

/**
 * The most characters the patterns of tenants' schemas may check for one request (a trigger, or
 * all the events of a bulk trigger together), every pattern and every value counted. Matching is
 * linear in the value but not free, and a schema may apply many patterns to the same value, or one
 * to every item of an array: a budget per request bounds the total, whatever the schema.
 */
export const PATTERN_BUDGET_CHARS = 256 * 1024;

/** What one request may still have checked by patterns (`left`, in characters). */
export interface PatternBudget {
  left: number;
}

export const newPatternBudget = (): PatternBudget => ({ left: PATTERN_BUDGET_CHARS });

/** A validation stopped because its patterns would check more than the request's budget. */
export class PatternBudgetSpent extends Error {
  constructor() {
    super(
      `would need more than ${PATTERN_BUDGET_CHARS.toLocaleString('en')} characters checked by the payloadSchema's patterns, their budget for one request (a bulk request's events share it)`,
    );
  }
}

// The budget of the validation under way: validating is synchronous, so one runs at a time.
let spending: PatternBudget | undefined;

/**
 * Runs a validator compiled by `createTenantAjv` with a request's pattern budget; throws
 * PatternBudgetSpent (before matching the value that would go over) when it runs out.
 */
export function validateWithin(budget: PatternBudget, validate: (data: unknown) => boolean, data: unknown): boolean {
  spending = budget;
  try {
    return validate(data);
  } finally {
    spending = undefined;
  }
}

/**
 * ajv's `code.regExp` for schemas tenants write: RE2 (re2js) matches in time linear in the value,
 * so no pattern can stall the process on a crafted payload, whatever its nesting; each value it
 * checks is charged to the request's budget first. The contract's own patterns keep V8's engine
 * (they are ours, and it is faster).
 */
const linearRegExp = Object.assign(
  (pattern: string) => {
    const compiled = RE2JS.compile(pattern);
    return {
      test(value: string): boolean {
        if (spending) {
          spending.left -= value.length;
          if (spending.left < 0) throw new PatternBudgetSpent();
        }
        return compiled.test(value);
      },
      // ajv keeps one compiled pattern per distinct toString().
      toString: () => `/${pattern}/`,
    };
  },
  { code: 'RE2JS.compile' },
);

/** The validator setup for a tenant's schema (a workflow's payloadSchema). */
export function createTenantAjv(): Ajv2020 {
  return createAjv({ code: { regExp: linearRegExp } });
}

/**
 * Why RE2 cannot run a pattern (a backreference, lookahead or lookbehind, which cannot match in
 * linear time), in one line; undefined when it can.
 */
export function linearPatternProblem(pattern: string): string | undefined {
  try {
    RE2JS.compile(pattern);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
