// The template engine on its own: the top-level view (payload fields beside Herald's names, as
// Novu v1 templates read them) and the size budget, counted while the output is written.
import { describe, expect, it, vi } from 'vitest';
import { adoptPrecompiled, MAX_MESSAGE_CHARS, MAX_RENDERED_CHARS, precompiled, render, renderingMessage, templateData, uncompiled } from '../../src/engine/templates.js';

const text = { escape: false };
const html = { escape: true };

describe('templateData: what a template sees at its top level', () => {
  const payload = { orderId: 'A-1', subscriber: 'Mallory', step: 'forged', tenant: 'other', items: ['x', 'y'] };
  const data = () => templateData({ payload, subscriber: { firstName: 'Ada' }, step: { total_count: 2 }, transactionId: 'tx-1' }, payload);

  it('reads payload fields at the top level and under payload', () => {
    expect(render('{{orderId}}/{{payload.orderId}}/{{#each items}}{{this}}{{/each}}/{{transactionId}}', data(), text)).toBe('A-1/A-1/xy/tx-1');
  });

  it("gives Herald's names first, tenant included though it has no value", () => {
    expect(render('{{subscriber.firstName}}|{{step.total_count}}|{{tenant}}|{{payload.subscriber}}|{{payload.tenant}}', data(), text)).toBe('Ada|2||Mallory|other');
  });

  it('lists Herald’s names, then the payload’s other fields, as the keys of the top level', () => {
    expect(render('{{#each this}}{{@key}} {{/each}}', data(), text)).toBe('payload subscriber step transactionId orderId items ');
  });

  it('answers as a plain object: nothing inherited is readable', () => {
    expect(render('[{{constructor}}][{{toString}}][{{__proto__}}][{{hasOwnProperty}}]', data(), text)).toBe('[][][][]');
  });

  it('writes a payload object whose own toString or valueOf is data as any object, escaped or not, and in a list', () => {
    const payload = { a: { toString: 'x' }, b: { valueOf: 1, toString: [] }, list: [1, { toString: 'y' }, null, 'z'], plain: { c: 1 }, nested: [[1, [{ toString: 2 }]], [], 3] };
    const view = templateData({ payload }, payload);
    for (const options of [text, { escape: true }]) {
      expect(render('{{a}}|{{b}}|{{list}}|{{plain}}|{{payload.a}}', view, options)).toBe('[object Object]|[object Object]|1,[object Object],,z|[object Object]|[object Object]');
      // As JavaScript joins a list of lists: each item once, nested or not.
      expect(render('{{nested}}|{{payload.list}}', view, options)).toBe(`1,[object Object],,3|1,[object Object],,z`);
      expect(render('{{{a}}}|{{#each list}}[{{this}}]{{/each}}', view, options)).toBe('[object Object]|[1][[object Object]][][z]');
    }
  });

  it('makes no copy of the payload: later changes to it show', () => {
    const live: Record<string, unknown> = { a: 1 };
    const view = templateData({ payload: live }, live);
    live.b = 2;
    expect(render('{{a}}{{b}}', view, text)).toBe('12');
  });
});

describe('the size budget, counted as the output is written', () => {
  it('renders exactly the cap, and fails one character over it', () => {
    const half = 'z'.repeat(MAX_RENDERED_CHARS / 2);
    expect(render('{{big}}{{big}}', { big: half }, text)).toHaveLength(MAX_RENDERED_CHARS);
    expect(() => render('{{big}}{{big}}!', { big: half }, text)).toThrow(`more than ${MAX_RENDERED_CHARS.toLocaleString('en')} characters`);
  });

  it("holds one message's fields together to MAX_MESSAGE_CHARS, each still to its own cap", () => {
    const field = 'f'.repeat(MAX_RENDERED_CHARS);
    // Four full fields are the message's whole budget; a fifth character anywhere goes over it.
    expect(renderingMessage(() => [1, 2, 3, 4].map(() => render('{{field}}', { field }, text).length))).toEqual([MAX_RENDERED_CHARS, MAX_RENDERED_CHARS, MAX_RENDERED_CHARS, MAX_RENDERED_CHARS]);
    expect(4 * MAX_RENDERED_CHARS).toBe(MAX_MESSAGE_CHARS);
    expect(() => renderingMessage(() => [1, 2, 3, 4, 5].map(() => render('{{field}}', { field }, text)))).toThrow(
      `The message's fields render more than ${MAX_MESSAGE_CHARS.toLocaleString('en')} characters together`,
    );
    // A message's budget is its own: the next starts afresh, and a render alone has only the field cap.
    expect(renderingMessage(() => render('{{field}}', { field }, text))).toHaveLength(MAX_RENDERED_CHARS);
    for (let i = 0; i < 5; i++) expect(render('{{field}}', { field }, text)).toHaveLength(MAX_RENDERED_CHARS);
  });

  it('counts what escaping writes, not the value before it', () => {
    const value = '<'.repeat(MAX_RENDERED_CHARS / 4 + 1); // each `<` is written as `&lt;`
    expect(render('{{value}}', { value }, text)).toHaveLength(value.length);
    expect(() => render('{{value}}', { value }, html)).toThrow('more than 262,144 characters');
  });

  it('stops at the value that goes over the cap, without reading the rest of the template', () => {
    let reads = 0;
    const context = {
      get big() {
        reads += 1;
        return 'y'.repeat(100_000);
      },
    };
    expect(() => render('{{big}}'.repeat(200), context, html)).toThrow('more than 262,144 characters');
    expect(reads).toBe(3);
  });

  it('counts values inside blocks and loops, and the text of the template itself, once each', () => {
    const value = 'v'.repeat(50_000);
    // with + if: 2 × 50,000 + text; each over 3 items: 3 × 50,000; total 250,000 + 5 < the cap.
    expect(render('{{#with this}}{{#if value}}{{value}}{{value}}{{/if}}{{/with}}{{#each items}}{{../value}}{{/each}}12345', { value, items: [1, 2, 3] }, text)).toHaveLength(250_005);
    expect(() => render('{{#each items}}{{../value}}{{/each}}', { value, items: [1, 2, 3, 4, 5, 6] }, text)).toThrow('more than 262,144 characters');
    expect(() => render(`{{#each items}}${'t'.repeat(100)}{{/each}}`, { items: Array.from({ length: 3000 }, () => 0) }, text)).toThrow('more than 262,144 characters');
  });

  it('counts what {{#lookup}} writes as a block', () => {
    const big = 'w'.repeat(100_000);
    expect(() => render('{{#lookup this "big"}}{{/lookup}}'.repeat(3), { big }, text)).toThrow('more than 262,144 characters');
  });
});

describe('a template compiled off the event loop (precompiled, then adoptPrecompiled)', () => {
  let copies = 0;
  /** The same template as render would compile it, and a copy (a comment apart) compiled as the payload check thread does. */
  function bothWays(source: string, escape: boolean) {
    const copy = `${source}{{!-- ${++copies} --}}`;
    const template = { source: copy, escape };
    expect(uncompiled([template]).templates).toEqual([template]);
    adoptPrecompiled(template, precompiled(template));
    expect(uncompiled([template]).templates).toEqual([]);
    return { own: source, adopted: copy };
  }

  it('renders what render compiles itself renders, escaped or not', () => {
    const payload = { name: '<Ada & "Bob">', items: ['x', '<y>'], nested: { a: { toString: 'x' } } };
    const view = templateData({ payload, subscriber: { firstName: 'Ada' } }, payload);
    const source = '<p>{{name}} {{{name}}} {{subscriber.firstName}}</p>{{#each items}}[{{@index}}:{{this}}]{{/each}}{{#if missing}}no{{else}}yes{{/if}}{{lookup payload "name"}}{{nested.a}}';
    for (const escape of [false, true]) {
      const { own, adopted } = bothWays(source, escape);
      expect(render(adopted, view, { escape })).toBe(render(own, view, { escape }));
    }
    expect(render(bothWays(source, true).adopted, view, html)).toContain('&lt;Ada &amp; &quot;Bob&quot;&gt; <Ada & "Bob">');
  });

  it('keeps the output budget: the cap of a field and of a message, counted as the output is written', () => {
    const half = 'z'.repeat(MAX_RENDERED_CHARS / 2);
    expect(render(bothWays('{{big}}{{big}}', false).adopted, { big: half }, text)).toHaveLength(MAX_RENDERED_CHARS);
    expect(() => render(bothWays('{{big}}{{big}}!', false).adopted, { big: half }, text)).toThrow(`more than ${MAX_RENDERED_CHARS.toLocaleString('en')} characters`);
    const value = '<'.repeat(MAX_RENDERED_CHARS / 4 + 1);
    expect(() => render(bothWays('{{value}}', true).adopted, { value }, html)).toThrow('more than 262,144 characters');
    let reads = 0;
    const context = {
      get big() {
        reads += 1;
        return 'y'.repeat(100_000);
      },
    };
    expect(() => render(bothWays('{{big}}'.repeat(200), true).adopted, context, html)).toThrow('more than 262,144 characters');
    expect(reads).toBe(3);
    const field = 'f'.repeat(MAX_RENDERED_CHARS);
    const { adopted } = bothWays('{{field}}', false);
    expect(() => renderingMessage(() => [1, 2, 3, 4, 5].map(() => render(adopted, { field }, text)))).toThrow(`more than ${MAX_MESSAGE_CHARS.toLocaleString('en')} characters together`);
  });

  it('fails as render fails a template that does not compile or is over its parse budget', () => {
    for (const source of ['{{#if a}}unclosed', `{{lookup ${'(lookup '.repeat(40)}a b${' b)'.repeat(40)} b}}`]) {
      const copy = `{{!-- ${++copies} --}}${source}`;
      let own: unknown;
      try {
        render(source, {}, text);
      } catch (err) {
        own = err;
      }
      adoptPrecompiled({ source: copy, escape: false }, precompiled({ source: copy, escape: false }));
      expect(() => render(copy, {}, text)).toThrow((own as Error).message);
      expect(() => render(copy, {}, text)).toThrow((own as Error).constructor as new () => Error);
    }
  });
});

describe("a render's time budget", () => {
  it('counts the CPU the render uses, not the time its thread waits off the CPU (as on a busy machine)', () => {
    // Each item keeps the thread waiting 3 ms, without using the CPU, when the template reads it: 192 ms in all.
    // The process's CPU time stands still meanwhile, as it would: here other test files share the process.
    const cpu = vi.spyOn(process, 'cpuUsage').mockReturnValue({ user: 0, system: 0 });
    try {
      const wait = new Int32Array(new SharedArrayBuffer(4));
      const items = Array.from({ length: 64 }, () => ({
        get v() {
          Atomics.wait(wait, 0, 0, 3);
          return 'x';
        },
      }));
      expect(renderingMessage(() => render('{{#each items}}{{v}}{{/each}}', { items }, text))).toBe('x'.repeat(64));
    } finally {
      cpu.mockRestore();
    }
  });

  it("does not count the CPU of the process's other threads (a schema compiling, a page read) against a render that is quick by the clock", () => {
    // process.cpuUsage() counts every thread of the process: here others use 20 ms between two of its readings.
    let used = 0;
    const cpu = vi.spyOn(process, 'cpuUsage').mockImplementation(() => ({ user: (used += 20_000), system: 0 }));
    try {
      const items = Array.from({ length: 256 }, () => 'x');
      expect(renderingMessage(() => render('{{#each items}}{{this}}{{/each}}', { items }, text))).toBe('x'.repeat(256));
    } finally {
      cpu.mockRestore();
    }
  });
});
