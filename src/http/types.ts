// What a handler is given and must return, over the wire types of `src/contract.ts`.
import type { Auth, Body, OperationId, PathParams, QueryParams, Reply } from '../contract.js';
import type { Deps } from '../deps.js';
import type { ReserveForAnswer } from '../answer-memory.js';

export interface HandlerContext<K extends OperationId> {
  params: PathParams<K>;
  query: QueryParams<K>;
  body: Body<K>;
  auth: Auth;
  deps: Deps;
  /** The request authenticated with Novu's `ApiKey` scheme: where Novu's SDKs need Novu's shape of an answer, it gets that. */
  novuScheme: boolean;
  /** Reserves the memory of a large page before it is read, for as long as this answer is under way (answer-memory.ts): give it to pageRequest. */
  reserve: ReserveForAnswer;
  /** The origin of the page that sent a browser's cross-origin request (`crossOriginOf`, inbox-cors.ts): an inbox session checks it against its environment's allowed origins. */
  origin: string | undefined;
}

export type OperationHandler<K extends OperationId> = (ctx: HandlerContext<K>) => Promise<Reply<K>>;

/** One handler for every operation in the contract: a missing one is a type error. */
export type OperationHandlers = { [K in OperationId]: OperationHandler<K> };
