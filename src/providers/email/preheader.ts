// The preheader: the line of preview text mail clients show after the subject. It travels as the
// first, hidden element of the HTML body, which is how every client reads it (there is no header).
import { escapeHtml } from '../../escape-html.js';

/** The body to send: `html` with the preheader, escaped, hidden at its start; `html` alone without one. */
export function withPreheader(html: string, preheader: string | undefined): string {
  if (!preheader) return html;
  return `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">${escapeHtml(preheader)}</div>${html}`;
}
