import { describe, expect, it } from 'vitest';
import { spec, type Node } from '../helpers/spec.js';
import { createBackend } from '../../src/http/backend.js';

/** Every `$ref` object of the bundled contract, with where it stands. */
function refsOf(node: unknown, at = '#'): Array<{ at: string; ref: Node }> {
  if (!node || typeof node !== 'object') return [];
  const here = typeof (node as Node).$ref === 'string' ? [{ at, ref: node as Node }] : [];
  return [...here, ...Object.entries(node).flatMap(([key, value]) => refsOf(value, `${at}/${key}`))];
}

// The backends dereference the bundle with dereference-json-schema (src/http/backend.ts), which
// follows local, unescaped pointers only and drops every keyword beside a `$ref` but a description:
// a `default` or `maxLength` written there would vanish from validation without a word.
describe('the bundled contract, as the backends dereference it', () => {
  const refs = refsOf(spec);

  it('has references to check', () => {
    expect(refs.length).toBeGreaterThan(100);
  });

  it('points only inside itself, with no escaped characters', () => {
    expect(refs.filter(({ ref }) => !/^#\/[A-Za-z0-9_./-]+$/.test(ref.$ref as string)).map(({ at }) => at)).toEqual([]);
  });

  it('writes nothing beside a $ref but a description or summary', () => {
    const beside = refs.flatMap(({ at, ref }) => Object.keys(ref).filter((key) => !['$ref', 'description', 'summary'].includes(key)).map((key) => `${at}: ${key}`));
    expect(beside).toEqual([]);
  });

  it('leaves no $ref in the definition a backend validates with', async () => {
    const backend = await createBackend();
    expect(refsOf(backend.definition)).toEqual([]);
  });
});
