// What a payloadSchema may cost, counted before anything is compiled or checked: the schemas a
// payload is checked against (schemaChecksOf) and the instructions a pattern compiles to
// (patternSize). Each count must bound the real work from above, and cost little itself.
import { describe, expect, it } from 'vitest';
import { compilePayloadSchema, MAX_PATTERN_SIZE, precompiledPatterns, schemaChecksOf as countWithSizes } from '../../src/engine/workflow-rules.js';
import { createTenantAjv, linearPatternProblem, patternSize, SCHEMA_CHECK_BUDGET } from '../../src/json-schema.js';

/** The count for a schema compilePayloadSchema accepts (it fails the test otherwise), with the sizes found there. */
function schemaChecksOf(schema: object, payload: unknown, limit: number): number {
  const accepted = compilePayloadSchema(schema, () => undefined);
  if ('problems' in accepted) throw new Error(`refused: ${JSON.stringify(accepted.problems)}`);
  return countWithSizes(schema, accepted.sizes, payload, limit);
}

const wide = (n: number) => ({ anyOf: Array.from({ length: n }, (_, i) => ({ const: i })) });
const over = (schema: object, payload: unknown) => schemaChecksOf(schema, payload, SCHEMA_CHECK_BUDGET) > SCHEMA_CHECK_BUDGET;

describe('schemaChecksOf', () => {
  it('counts each schema that may apply to each value, through every applicator', () => {
    // The object, its one key, the array, and each item the whole anyOf (itself, its list, ten branches).
    expect(schemaChecksOf({ type: 'object', properties: { a: { type: 'array', items: wide(10) } } }, { a: [1, 2, 3] }, 1e9)).toBe(1 + 1 + 1 + 3 * 12);
    expect(over({ properties: { a: { items: wide(990) } } }, { a: Array(20_000).fill(1) })).toBe(true);
    expect(over({ properties: { a: { items: wide(990) } } }, { a: Array(500).fill(1) })).toBe(false);
    // Draft 7's dependencies, which ajv still runs, and the 2020 keywords.
    expect(over({ items: { dependencies: { k: wide(985) } } }, Array(100_000).fill({ k: 1 }))).toBe(true);
    expect(over({ items: { dependentSchemas: { k: wide(985) } } }, Array(100_000).fill({ k: 1 }))).toBe(true);
    expect(over({ prefixItems: [wide(490)], unevaluatedItems: wide(490) }, Array(4_000).fill(1))).toBe(true);
    expect(over({ $defs: { w: wide(490) }, additionalProperties: { $ref: '#/$defs/w' } }, Object.fromEntries(Array.from({ length: 4_000 }, (_, i) => [`k${i}`, 1])))).toBe(true);
  });

  it("counts an object's keys for every keyword that looks at them, even one that applies nothing", () => {
    const keys = Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i]));
    expect(over({ allOf: Array(400).fill({ patternProperties: {} }) }, keys)).toBe(true);
    expect(over({ allOf: Array(300).fill({ properties: { x: {} } }) }, keys)).toBe(true);
  });

  it('counts a value compared whole (const, enum, uniqueItems) by the values it holds', () => {
    const big = Array.from({ length: 10_000 }, (_, i) => ({ i }));
    expect(over({ allOf: Array(100).fill({ const: big }) }, big)).toBe(true);
    expect(over({ allOf: Array(100).fill({ uniqueItems: true }) }, big)).toBe(true);
  });

  it("reads only the keywords that apply schemas: a schema's other keys cost nothing, however many", () => {
    const unknown = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`u${i}`, 0]));
    const schema = { properties: { a: { items: unknown } } };
    const payload = { a: Array(20_000).fill({}) };
    expect(schemaChecksOf(schema, payload, SCHEMA_CHECK_BUDGET)).toBe(1 + 1 + 1 + 20_000);
  });

  it('stops counting just past its limit', () => {
    expect(schemaChecksOf({ items: wide(990) }, Array(200_000).fill(1), 1_000)).toBeLessThanOrEqual(1_000 + 991);
  });

  it('bounds what ajv does: a payload within the count validates as the schema says', () => {
    const schema = { type: 'object', properties: { a: { type: 'array', items: wide(300) } } };
    const validate = createTenantAjv({ allErrors: false }).compile(schema);
    const payload = { a: Array(3_000).fill(299) };
    expect(over(schema, payload)).toBe(false);
    expect(validate(payload)).toBe(true);
    expect(validate({ a: [300] })).toBe(false);
  });
});

describe('patternSize', () => {
  it('counts a counted repetition written out, and a group for each time it is repeated', () => {
    expect(patternSize('abc')).toBe(3);
    expect(patternSize('a{1000}')).toBe(1_000);
    expect(patternSize('a{1000}'.repeat(1_000))).toBe(1_000_000);
    expect(patternSize('(ab){10}')).toBe(20);
    expect(patternSize('a{2,}')).toBe(2);
  });

  it('weighs a class by what building it costs: Unicode tables, and ranges wide enough that case folding walks them', () => {
    expect(patternSize('[a-z]')).toBeLessThan(100);
    expect(patternSize('\\pL')).toBeGreaterThanOrEqual(100);
    expect(patternSize('[\\pL\\pN]')).toBeGreaterThanOrEqual(200);
    expect(patternSize('(?i)[\\x{100}-\\x{1E943}]')).toBeGreaterThan(2_000);
    expect(patternSize('(?i)[\\x{100}-\\x{1E943}]'.repeat(1_000))).toBeGreaterThan(100_000);
  });
});

describe('patterns compiled ahead (precompiledPatterns)', () => {
  it('compiles each pattern of a schema once, and compiling the schema uses those programs', async () => {
    const schema = { properties: { a: { pattern: '^a+$' }, b: { pattern: '^a+$' }, c: { patternProperties: { '^x': { pattern: '^b$' } } } } };
    const patterns = await precompiledPatterns(schema);
    expect([...patterns.keys()].sort()).toEqual(['^a+$', '^b$', '^x']);
    // The program given for a pattern is the one its schema matches with: none is compiled again.
    const swapped = new Map(patterns);
    swapped.set('^a+$', patterns.get('^b$')!);
    const validate = createTenantAjv({ allErrors: false, patterns: swapped }).compile(schema);
    expect(validate({ a: 'b' })).toBe(true);
    expect(validate({ a: 'aaa' })).toBe(false);
    // And the problem it had compiling is the one reported.
    expect(linearPatternProblem('^a+$', new Map([['^a+$', new Error('no')]]))).toBe('no');
  });

  it("stops where the schema's patterns pass the bound they may compile to together", async () => {
    const big = 'a{1000}';
    const schema = { properties: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${i}`, { pattern: `${big}${i}` }])) };
    const patterns = await precompiledPatterns(schema);
    const total = [...patterns.keys()].reduce((sum, pattern) => sum + patternSize(pattern), 0);
    expect(total).toBeLessThanOrEqual(MAX_PATTERN_SIZE);
    expect(total + patternSize(`${big}${patterns.size}`)).toBeGreaterThan(MAX_PATTERN_SIZE);
  });
});
