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
 * ajv's `code.regExp` for schemas tenants write: RE2 (re2js) matches in time linear in the value,
 * so no pattern can stall the process on a crafted payload, whatever its nesting. The contract's
 * own patterns keep V8's engine (they are ours, and it is faster).
 */
const linearRegExp = Object.assign((pattern: string) => RE2JS.compile(pattern), { code: 'RE2JS.compile' });

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
