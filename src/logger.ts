import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** JSON lines at `level`, to stdout or (tests) to `destination`. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      // Belt and braces: credentials and keys never reach the log, whatever a caller passes in.
      redact: ['req.headers.authorization', '*.credentials', '*.password', '*.apiKey', '*.secretKey', '*.token'],
    },
    destination,
  );
}
