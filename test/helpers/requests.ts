import http from 'node:http';
import type { Operation, Request } from 'openapi-backend';

export interface RequestVariants {
  /** Path parameter values, put in every parameter of the operation's path. */
  ids: string[];
  queries: object[];
  headers: object[];
  bodies: unknown[];
}

/** Every combination of the variants, for every operation: requests to compare two implementations on. */
export function* requestsFor(operations: Operation[], { ids, queries, headers, bodies }: RequestVariants): Generator<{ operation: Operation; req: Request }> {
  for (const operation of operations) {
    for (const id of ids) {
      const path = operation.path.replace(/\{[^}]+\}/g, id);
      for (const query of queries) {
        for (const header of headers) {
          for (const body of bodies) {
            const req = { method: operation.method.toUpperCase(), path, query: structuredClone(query), headers: header, body: structuredClone(body) } as Request;
            yield { operation, req };
          }
        }
      }
    }
  }
}

/** GETs `url` and reads none of the answer: it stays under way, holding what it holds, until `stop` closes the connection. */
export function unreadAnswer(url: string, headers: Record<string, string>): Promise<{ status: number; stop: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers }, (res) => {
      res.pause();
      resolve({ status: res.statusCode!, stop: () => req.destroy() });
    });
    req.on('error', (err) => (String(err).includes('socket hang up') ? undefined : reject(err)));
  });
}
