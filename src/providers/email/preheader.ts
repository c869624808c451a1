// The preheader: the line of preview text mail clients show after the subject. It travels as the
// first, hidden element of the HTML body, which is how every client reads it (there is no header).

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** The body to send: `html` with the preheader, escaped, hidden at its start; `html` alone without one. */
export function withPreheader(html: string, preheader: string | undefined): string {
  if (!preheader) return html;
  const text = preheader.replace(/[&<>"']/g, (char) => ESCAPES[char]);
  return `<div style="display:none;max-height:0;overflow:hidden;mso-hide:all" aria-hidden="true">${text}</div>${html}`;
}
