import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';

const addFormats = ajvFormats.default;

/**
 * JSON Schema 2020-12 (OpenAPI 3.1's dialect) with formats, every error, and discriminated steps: the
 * one validator setup for the contract (http/) and for the schemas tenants send (engine/).
 */
export function createAjv(options: object = {}): Ajv2020 {
  const ajv = new Ajv2020({ ...options, strict: false, allErrors: true, discriminator: true });
  addFormats(ajv);
  return ajv;
}
