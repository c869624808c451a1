// An experiment, not a fix: what caching prepared statements would buy on SQLite, measured without
// touching src/. knex's better-sqlite3 dialect calls `connection.prepare(sql)` for every query
// (16% of the API's CPU for GET /subscribers/:id once routing is fixed; 19% of a fan-out worker's);
// this keeps the statements of each connection by SQL text (at most 1,000; then starts over).
// knex sets no per-statement mode unless a query asks for safeIntegers, so reuse is safe.
//   npm run bench -- --node-args=--import=./scripts/bench/experiments/statement-cache.mjs
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../../package.json', import.meta.url));
const Database = require('better-sqlite3');
const prepare = Database.prototype.prepare;
const caches = new WeakMap();

Database.prototype.prepare = function cachedPrepare(sql) {
  let cache = caches.get(this);
  if (!cache) caches.set(this, (cache = new Map()));
  let statement = cache.get(sql);
  if (!statement) {
    if (cache.size >= 1000) cache.clear();
    statement = prepare.call(this, sql);
    cache.set(sql, statement);
  }
  return statement;
};
