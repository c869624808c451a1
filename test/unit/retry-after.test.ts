// A provider's Retry-After (providers/http.ts): seconds or an HTTP-date, and nothing else.
import { describe, expect, it } from 'vitest';
import { retryAfter } from '../../src/providers/http.js';

describe('retryAfter', () => {
  it('reads whole and fractional seconds', () => {
    expect(retryAfter('7')).toBe(7_000);
    expect(retryAfter(' 0 ')).toBe(0);
    expect(retryAfter('1.5')).toBe(1_500);
  });

  it('reads the three forms of an HTTP-date, asctime as GMT', () => {
    const at = new Date(Date.now() + 60_000);
    at.setUTCMilliseconds(0);
    const imf = at.toUTCString();
    const [day, date, month, year, time] = imf.replace(',', '').split(' ');
    const days: Record<string, string> = { Mon: 'Monday', Tue: 'Tuesday', Wed: 'Wednesday', Thu: 'Thursday', Fri: 'Friday', Sat: 'Saturday', Sun: 'Sunday' };
    const rfc850 = `${days[day]}, ${date}-${month}-${year.slice(2)} ${time} GMT`;
    const asctime = `${day} ${month} ${String(Number(date)).padStart(2, ' ')} ${time} ${year}`;
    for (const header of [imf, rfc850, asctime]) {
      const ms = retryAfter(header)!;
      expect(ms, header).toBeGreaterThan(55_000);
      expect(ms, header).toBeLessThanOrEqual(60_000);
    }
    expect(retryAfter('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(0);
  });

  it('takes anything else for no Retry-After, where JavaScript would read a day in 2001', () => {
    for (const header of ['-5', '1.5.1', '5s', 'soon', '+3', 'Tue, 1 Jan 2030', '1e3', '', undefined]) expect(retryAfter(header), String(header)).toBeUndefined();
  });
});
