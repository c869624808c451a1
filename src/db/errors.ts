/** Whether an error comes from the database (SQLite's codes, or PostgreSQL's errors, which carry a severity). */
export function isDatabaseError(err: unknown): boolean {
  const { code, severity } = (err ?? {}) as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && (code.startsWith('SQLITE_') || typeof severity === 'string');
}

/** Whether a database error is a unique-constraint violation, in SQLite's words or PostgreSQL's. */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}

/** Whether a write pointed at a row that is gone (deleted by a concurrent request). */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || code === '23503';
}
