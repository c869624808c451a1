// An experiment, not a fix: what the routing fix proposed in bench/RESULTS.md would buy, measured
// without touching src/. Loaded into the API process with
//   npm run bench -- --node-args=--import=./scripts/bench/experiments/fast-router.mjs
// it patches openapi-backend's router so that (1) getOperations() is computed once per definition
// instead of on every call (it rebuilds all 35 operations with lodash: ~0.55 ms a call here), and
// (2) matchOperation() uses a table built once, with each path template's RegExp compiled once,
// instead of compiling 35 RegExps per request for a templated path. Same matching rules: exact
// path first, then templates by specificity (fewest characters in parameters), then 405.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../../package.json', import.meta.url));
const { OpenAPIRouter } = require('openapi-backend/router.js');
const proto = OpenAPIRouter.prototype;
const originalGetOperations = proto.getOperations;

const cache = new WeakMap(); // router → { definition, operations, exact, templated }

function tableOf(router) {
  let entry = cache.get(router);
  if (entry && entry.definition === router.definition) return entry;
  const operations = originalGetOperations.call(router);
  const exact = new Map();
  for (const op of operations) {
    if (!exact.has(op.path)) exact.set(op.path, []);
    exact.get(op.path).push(op);
  }
  const escape = (literal) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const templated = operations
    .map((op, index) => ({
      op,
      index,
      regex: new RegExp(`^${op.path.replace(/\{[^}]+\}/g, '\0').split('\0').map(escape).join('[^/]+')}$`),
      specificity: op.path.replace(/\{.*?\}/g, '').length,
    }))
    .sort((a, b) => b.specificity - a.specificity || a.index - b.index);
  entry = { definition: router.definition, operations, exact, templated };
  cache.set(router, entry);
  return entry;
}

proto.getOperations = function getOperations() {
  return tableOf(this).operations;
};

proto.matchOperation = function matchOperation(req, strict) {
  req = this.normalizeRequest(req);
  const fail = (message) => {
    if (strict) throw Error(message);
    return undefined;
  };
  if (!this.isUnderApiRoot(req.path)) return fail('404-notFound: no route matches request');
  const path = this.normalizePath(req.path);
  const table = tableOf(this);
  const exact = table.exact.get(path)?.find(({ method }) => method === req.method);
  if (exact) return exact;
  const matches = table.templated.filter(({ regex }) => regex.test(path));
  if (matches.length === 0) return fail('404-notFound: no route matches request');
  return matches.find(({ op }) => op.method === req.method)?.op ?? fail('405-methodNotAllowed: this method is not registered for the route');
};
