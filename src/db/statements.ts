// What both dialects need to know about a statement's text.

/**
 * A select list or RETURNING with `*` (its table quoted or not, by any rule). PostgreSQL fixes a named
 * statement's result columns when it prepares it: once a migration (another process's, in a rolling
 * upgrade) adds a column to the table, every later run on that connection fails with "cached plan
 * must not change result type". On SQLite such a statement's column names are read with each row
 * (readRows).
 */
export const EVERY_COLUMN = /(?:\bSELECT(?:\s+DISTINCT)?\s+|\bRETURNING\s+|,\s*)(?:[["`]?\w+[\]"`]?\.)?\*/i;
