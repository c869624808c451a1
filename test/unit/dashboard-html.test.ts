// The dashboard's html tag: what a tenant wrote is text, and characters that would reorder the text
// around them are named where the value is shown, and kept where a form or link carries it.
import { describe, expect, it } from 'vitest';
import { html } from '../../src/dashboard/html.js';

const REORDERING = '\u202Egnp.exe\u202C';

describe('html', () => {
  it('names reordering characters in text, and keeps them (escaped) in attribute values', () => {
    const page = html`<p title="${REORDERING}">${REORDERING}</p><input name="s" value="${REORDERING}"><a href="/x?a=1&amp;s=${REORDERING}">${[REORDERING, '<b>']}</a>`;
    expect(page.value).toBe(
      `<p title="${REORDERING}">[U+202E]gnp.exe[U+202C]</p><input name="s" value="${REORDERING}"><a href="/x?a=1&amp;s=${REORDERING}">[U+202E]gnp.exe[U+202C]&lt;b&gt;</a>`,
    );
  });

  it('reads the context through nested fragments and quotes in text', () => {
    const inner = html`<span class="x">${REORDERING}</span>`;
    expect(html`<div>"${REORDERING}" ${inner}<i data-v="${REORDERING}"></i></div>`.value).toBe(
      `<div>"[U+202E]gnp.exe[U+202C]" <span class="x">[U+202E]gnp.exe[U+202C]</span><i data-v="${REORDERING}"></i></div>`,
    );
  });
});
