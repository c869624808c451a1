// Wire types, derived from the generated contract and never written by hand. A handler's reply must
// be one of its operation's documented success statuses with exactly that status's body, so `tsc`
// fails when code and contract drift apart.
import type { components, operations } from '../../generated/v1.js';
import type { Deps } from '../deps.js';

export type Schemas = components['schemas'];
export type OperationId = keyof operations;

type Responses<K extends OperationId> = operations[K]['responses'];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 204>;
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : undefined;

export type Body<K extends OperationId> = JsonOf<NonNullable<operations[K]['requestBody']>>;
export type PathParams<K extends OperationId> = NonNullable<operations[K]['parameters']['path']>;
export type QueryParams<K extends OperationId> = NonNullable<operations[K]['parameters']['query']>;

export type Reply<K extends OperationId, S extends SuccessStatus<K> = SuccessStatus<K>> = {
  [Status in S]: { status: Status; body: JsonOf<Responses<K>[Status]>; headers?: Record<string, string> };
}[S];

/** The key's owner: every query a handler makes is scoped to this environment. */
export interface Auth {
  organizationId: string;
  environmentId: string;
}

export interface HandlerContext<K extends OperationId> {
  params: PathParams<K>;
  query: QueryParams<K>;
  body: Body<K>;
  auth: Auth;
  deps: Deps;
}

export type OperationHandler<K extends OperationId> = (ctx: HandlerContext<K>) => Promise<Reply<K>>;

/** One handler for every operation in the contract: a missing one is a type error. */
export type OperationHandlers = { [K in OperationId]: OperationHandler<K> };
