// Wire types, derived from the generated contract and never written by hand: the bottom layer that
// every other room may import. A handler's reply must be one of its operation's documented success
// statuses with exactly that status's body, so `tsc` fails when code and contract drift apart.
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { components, operations } from '../generated/v1.js';
import { createAjv, type Validate } from './json-schema.js';
import { ROOT } from './paths.js';

/** The bundled contract (`npm run generate`): what the router, the docs and `/v1/openapi.yaml` serve. */
export const CONTRACT_PATH = path.join(ROOT, 'generated', 'openapi.yaml');

let contractText: string | undefined;

/**
 * The bundled contract, parsed: a copy of its own for each caller, which may change it. The YAML is
 * read and parsed once a process (100 ms or more) into JSON text, which parses in about 2 ms; kept
 * as text, not as objects, it costs the garbage collector nothing to keep (parsed, it was 2.6 MB of
 * objects that every full collection walked).
 */
export function contractDocument(): Record<string, unknown> {
  contractText ??= JSON.stringify(YAML.parse(fs.readFileSync(CONTRACT_PATH, 'utf8')));
  return JSON.parse(contractText) as Record<string, unknown>;
}

/** The validators of the contract's schemas share one ajv, and so the schemas they reference. */
let contractAjv: ReturnType<typeof createAjv> | undefined;

/**
 * A validator of one of the contract's schemas, for input that reaches the engine without the API's
 * router (the dashboard's forms), so that it meets the same limits. It stops at the first error.
 */
export function schemaValidator(name: keyof components['schemas']): Validate {
  if (!contractAjv) {
    contractAjv = createAjv({ allErrors: false });
    contractAjv.addSchema({ $id: 'herald:contract', components: contractDocument().components });
  }
  return contractAjv.getSchema(`herald:contract#/components/schemas/${name}`) as Validate;
}

export type Schemas = components['schemas'];
/** The operations Herald serves; the contract's `webhooks` (what Herald sends, ids ending in `Webhook`) are not among them. */
export type OperationId = Exclude<keyof operations, `${string}Webhook`>;

type Responses<K extends OperationId> = operations[K]['responses'];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 204>;
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : undefined;

export type Body<K extends OperationId> = JsonOf<NonNullable<operations[K]['requestBody']>>;
export type PathParams<K extends OperationId> = NonNullable<operations[K]['parameters']['path']>;
export type QueryParams<K extends OperationId> = NonNullable<operations[K]['parameters']['query']>;

export type Reply<K extends OperationId, S extends SuccessStatus<K> = SuccessStatus<K>> = {
  [Status in S]: { status: Status; body: JsonOf<Responses<K>[Status]>; headers?: Record<string, string> };
}[S];

export type ErrorBody = Schemas['Error'];
export type ErrorDetail = Schemas['ErrorDetail'];

export type Channel = Schemas['ChannelType'];
/** Every channel, in the order the contract and the preferences list them. */
export const CHANNELS: readonly Channel[] = ['in_app', 'email', 'sms', 'chat', 'push'];

/** The key's owner: every query made for a request is scoped to this environment. */
export interface Auth {
  organizationId: string;
  environmentId: string;
  /** Set for a subscriber token (or stream ticket) only: the subscriber whose inbox it opens. */
  subscriberId?: string;
  /** Set with subscriberId (but for a ticket made before tickets kept it): the token's own limits. */
  credential?: InboxCredential;
}

/** The subscriber token an inbox request came with, or the one its stream ticket was made with. */
export interface InboxCredential {
  /** The id of the inbox signing secret that signed it: it stops working when that is retired. */
  kid: string;
  /** When it expires (epoch ms). */
  expiresAt: number;
}
