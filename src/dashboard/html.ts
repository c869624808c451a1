import { escapeHtml } from '../escape-html.js';

/** Markup that is already safe: what `html` returns, and nothing else. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/**
 * The characters that reorder the text around them (embeddings, overrides, isolates): in a tenant's
 * value, `\u202Egnp.exe` would show as `exe.png`. They are shown by name instead.
 */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;
const named = (c: string) => `[U+${c.charCodeAt(0).toString(16).toUpperCase()}]`;

/** `value` as markup; text (`inAttribute` false) has its reordering characters named. */
function render(value: unknown, inAttribute: boolean): string {
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map((item) => render(item, inAttribute)).join('');
  if (value === undefined || value === null || value === false) return '';
  const text = String(value);
  return escapeHtml(inAttribute ? text : text.replace(BIDI_CONTROLS, named));
}

/**
 * Whether what follows `markup` is inside a (double-quoted) attribute's value: an attribute keeps
 * a value as it is (a form field sends it back, a link filters by it), text shows it.
 */
function insideAttribute(markup: string): boolean {
  const tag = markup.lastIndexOf('<');
  if (tag < markup.lastIndexOf('>')) return false;
  let quotes = 0;
  for (let i = markup.indexOf('"', tag); i !== -1; i = markup.indexOf('"', i + 1)) quotes++;
  return quotes % 2 === 1;
}

/**
 * A template tag that escapes every interpolated value unless it is itself `html`, so a page can
 * only contain markup someone wrote here. Arrays are joined; null, undefined and false vanish.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  // Where each value goes is read from the template's own text: escaped values hold no < > or ".
  let written = strings[0];
  for (let i = 0; i < values.length; i++) written += render(values[i], insideAttribute(written)) + strings[i + 1];
  return new SafeHtml(written);
}
