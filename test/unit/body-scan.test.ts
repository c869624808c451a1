// The scan of a JSON body's bytes must say exactly what a walk over the parsed body would: the
// request path skips that walk on its word, and refuses bodies over its counts.
import { describe, expect, it } from 'vitest';
import { scanJsonBody } from '../../src/http/body-scan.js';

/** What the scan should find, from the parsed value. */
function walked(value: unknown): { values: number; members: number; deepest: number; keyNames: Set<string> } {
  const keyNames = new Set<string>();
  let values = 0;
  let members = 0;
  let deepest = 0;
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [v, depth] = pending.pop()!;
    values++;
    if (v === null || typeof v !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (Array.isArray(v)) for (const item of v) pending.push([item, depth + 1]);
    else
      for (const [key, item] of Object.entries(v)) {
        members++;
        keyNames.add(key);
        pending.push([item, depth + 1]);
      }
  }
  return { values, members, deepest, keyNames };
}

/** A seeded random JSON value with every kind of token, escapes and odd spacing among them. */
function randomValue(random: () => number, depth = 0): unknown {
  const pick = Math.floor(random() * (depth > 5 ? 6 : 8));
  const strings = ['', 'a', 'é', 'say "hi"', 'back\\slash', 'tab\there', '{not:[a,container]}', 'x,y:z', '🎉', 'true', '-1.5e3'];
  switch (pick) {
    case 0: return null;
    case 1: return random() < 0.5;
    case 2: return Math.round((random() - 0.5) * 1e6) / (random() < 0.5 ? 1 : 1000);
    case 3: return -1.25e-7;
    case 4:
    case 5: return strings[Math.floor(random() * strings.length)];
    case 6: return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
    default: return Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [strings[Math.floor(random() * strings.length)] + String(Math.floor(random() * 3)), randomValue(random, depth + 1)]));
  }
}

function seeded(seed: number): () => number {
  let s = seed;
  return () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
}

const bytes = (text: string) => Buffer.from(text, 'utf8');

describe('scanJsonBody', () => {
  it('counts values, members, distinct key names and depth exactly as a walk over the parsed value does', () => {
    const random = seeded(7);
    for (let i = 0; i < 2_000; i++) {
      const value = { body: randomValue(random) };
      const text = JSON.stringify(value, null, i % 3 === 0 ? 2 : undefined);
      const expected = walked(value);
      expect(scanJsonBody(bytes(text), 1_000), text).toEqual({ values: expected.values, members: expected.members, deepest: expected.deepest, keyNames: expected.keyNames.size, mayHoldNonText: false });
    }
  });

  it('finds the escapes that spell NUL or a UTF-16 surrogate, in values and in keys, and nothing else', () => {
    for (const text of ['{"a":"\\u0000"}', '{"\\u0000":1}', '{"a":"\\ud83d\\ude00"}', '{"a":"\\uDFFF"}', '{"a":"x\\uD800"}', '["\\udc00"]']) expect(scanJsonBody(bytes(text)).mayHoldNonText, text).toBe(true);
    for (const text of ['{"a":"\\u0001"}', '{"a":"\\u00000"}'.replace('00000', '0041'), '{"a":"\\\\u0000"}', '{"a":"\\uc800"}', '{"a":"\\ue000"}', '{"a":"d800 \\n"}']) expect(scanJsonBody(bytes(text)).mayHoldNonText, text).toBe(false);
  });

  it('counts the key names only up to one past what it is asked to count', () => {
    const text = JSON.stringify(Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, i])));
    expect(scanJsonBody(bytes(text), 100).keyNames).toBe(101);
    expect(scanJsonBody(bytes(text), 10_000).keyNames).toBe(5_000);
    expect(scanJsonBody(bytes(text)).keyNames).toBeUndefined();
  });
});
