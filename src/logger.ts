import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: undefined,
    // Belt and braces: credentials and keys never reach the log, whatever a caller passes in.
    redact: ['req.headers.authorization', '*.credentials', '*.password', '*.apiKey', '*.secretKey', '*.token'],
  });
}
