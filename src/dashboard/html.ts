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

function render(value: unknown): string {
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === undefined || value === null || value === false) return '';
  return escapeHtml(String(value).replace(BIDI_CONTROLS, named));
}

/**
 * A template tag that escapes every interpolated value unless it is itself `html`, so a page can
 * only contain markup someone wrote here. Arrays are joined; null, undefined and false vanish.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  return new SafeHtml(strings.reduce((out, text, i) => out + render(values[i - 1]) + text));
}
