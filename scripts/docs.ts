// npm run docs [-- --out FILE]
//
// The API reference as one self-contained page (dist/docs/index.html by default). Every operation
// gets a curl and a TypeScript sample (`x-codeSamples`) derived from its own examples, so the
// samples change with the contract and never drift from it. They are added to a copy of the
// contract's bundle (generated/openapi.yaml), never to the contract itself, and that copy is
// rendered by Redocly with its scripts inlined: the page works offline.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import YAML from 'yaml';
import { CONTRACT_PATH } from '../src/contract.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_DOCS_OUT = path.join(ROOT, 'dist', 'docs', 'index.html');
const REDOCLY = path.join(ROOT, 'node_modules', '.bin', 'redocly');
// Redoc shows only the sample languages its configuration lists (curl and a few others by default):
// ours, and the request payload. `--config` also keeps the repository's lint-only redocly.yaml out.
const REDOC_CONFIG = { openapi: { codeSamples: { languages: [{ lang: 'curl' }, { lang: 'TypeScript' }, { lang: 'Payload' }] } } };
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type Spec = Record<string, any>;
type Node = Record<string, any>;

export interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

/** Follows local `$ref`s (`#/components/...`) until it reaches the thing itself. */
function resolve(spec: Spec, node: Node | undefined): Node | undefined {
  let current = node;
  for (let hops = 0; current && typeof current.$ref === 'string' && hops < 20; hops++) {
    const pointer = (current.$ref as string).replace(/^#\//, '').split('/');
    current = pointer.reduce<any>((at, segment) => at?.[segment.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
  }
  return current;
}

function parameterExample(parameter: Node): unknown {
  if (parameter.example !== undefined) return parameter.example;
  const named = parameter.examples && Object.values(parameter.examples)[0];
  if (named && typeof named === 'object' && 'value' in named) return (named as Node).value;
  return parameter.schema?.example ?? parameter.schema?.examples?.[0] ?? parameter.schema?.default;
}

/** The operation's first JSON request example, as the reader sees it first in the docs. */
function bodyExample(spec: Spec, operation: Node): unknown {
  const media = resolve(spec, operation.requestBody)?.content?.['application/json'];
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = media.examples && resolve(spec, Object.values(media.examples)[0] as Node);
  if (first && 'value' in first) return first.value;
  return resolve(spec, media.schema)?.example;
}

export interface RequestShape {
  method: string;
  path: string;
  pathParams: Record<string, unknown>;
  /** Required query parameters, and paging on lists so readers see how to page. */
  query: Record<string, unknown>;
  body: unknown;
  /** The inbox's operations take a subscriber token, the others an API key. */
  subscriberToken?: boolean;
  /** An operation that takes no credential at all (`security: []`, the inbox session). */
  open?: boolean;
}

/** The request an operation's examples describe: the one its code samples send. */
export function exampleRequest(spec: Spec, apiPath: string, method: string): RequestShape {
  const pathItem = spec.paths[apiPath];
  const operation = pathItem[method];
  const parameters = [...(pathItem.parameters ?? []), ...(operation.parameters ?? [])]
    .map((parameter: Node) => resolve(spec, parameter)!)
    .filter(Boolean);
  const pathParams: Record<string, unknown> = {};
  const query: Record<string, unknown> = {};
  for (const parameter of parameters) {
    const example = parameterExample(parameter);
    if (example === undefined) continue;
    if (parameter.in === 'path') pathParams[parameter.name] = example;
    else if (parameter.in === 'query' && (parameter.required || parameter.name === 'page' || parameter.name === 'limit')) {
      query[parameter.name] = example;
    }
  }
  const subscriberToken = ((operation.security ?? []) as Node[]).some((requirement) => 'subscriberToken' in requirement);
  const open = Array.isArray(operation.security) && operation.security.length === 0;
  return {
    method: method.toUpperCase(),
    path: apiPath,
    pathParams,
    query,
    body: bodyExample(spec, operation),
    ...(subscriberToken ? { subscriberToken } : {}),
    ...(open ? { open } : {}),
  };
}

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** The request's path with its parameters filled in, and its query string. */
export function exampleUrl(request: RequestShape): string {
  const filledPath = request.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(String(request.pathParams[name])));
  const search = new URLSearchParams(Object.entries(request.query).map(([k, v]) => [k, String(v)])).toString();
  return `${filledPath}${search ? `?${search}` : ''}`;
}

function curlSample(request: RequestShape, baseUrl: string): string {
  const url = `${baseUrl}${exampleUrl(request)}`;
  const lines = [`curl${request.method === 'GET' ? '' : ` -X ${request.method}`} ${shellQuote(url)}`];
  if (!request.open) lines.push(`-H "Authorization: Bearer ${request.subscriberToken ? '$HERALD_SUBSCRIBER_TOKEN' : '$HERALD_API_KEY'}"`);
  if (request.body !== undefined) {
    lines.push(`-H 'Content-Type: application/json'`, `-d ${shellQuote(JSON.stringify(request.body, null, 2))}`);
  }
  return lines.join(' \\\n  ');
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const tsString = (text: string) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;

/** A value as a TypeScript literal the way a person writes one: short ones on a line, others spread out. */
export function tsLiteral(value: unknown, indent = ''): string {
  if (typeof value === 'string') return tsString(value);
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const inner = `${indent}  `;
  const isArray = Array.isArray(value);
  const entries = isArray
    ? (value as unknown[]).map((item) => tsLiteral(item, inner))
    : Object.entries(value).map(([key, item]) => `${IDENTIFIER.test(key) ? key : tsString(key)}: ${tsLiteral(item, inner)}`);
  const [open, close] = isArray ? ['[', ']'] : ['{', '}'];
  if (entries.length === 0) return `${open}${close}`;
  const oneLine = isArray ? `[${entries.join(', ')}]` : `{ ${entries.join(', ')} }`;
  if (!oneLine.includes('\n') && indent.length + oneLine.length <= 72) return oneLine;
  return `${open}\n${entries.map((entry) => `${inner}${entry},`).join('\n')}\n${indent}${close}`;
}

/** The package a frontend project installs (`npm install …/dist/client`, src/client/README.md). */
const CLIENT_PACKAGE = '@herald/client';

function typescriptSample(request: RequestShape, serverUrl: string, operationId: string): string {
  const init: Record<string, unknown> = {};
  const params: Record<string, unknown> = {};
  if (Object.keys(request.pathParams).length > 0) params.path = request.pathParams;
  if (Object.keys(request.query).length > 0) params.query = request.query;
  if (Object.keys(params).length > 0) init.params = params;
  if (request.body !== undefined) init.body = request.body;
  const args = [tsString(request.path), ...(Object.keys(init).length > 0 ? [tsLiteral(init)] : [])].join(', ');
  const call = (client: string) => [`const { data, error } = await ${client}.${request.method}(${args});`, 'if (error) throw new Error(error.message);', 'console.log(data);'];
  if (request.open) {
    // No credential to send: the contract's types over a plain openapi-fetch client.
    return [
      `import createClient from 'openapi-fetch';`,
      `import type { paths } from '${CLIENT_PACKAGE}';`,
      '',
      `const herald = createClient<paths>({ baseUrl: ${tsString(`${serverUrl}/v1`)} });`,
      '',
      ...call('herald'),
    ].join('\n');
  }
  if (request.subscriberToken) {
    // In the browser: the inbox client, with a subscriber token from your backend, never an API key.
    const inbox = [
      `import { createInboxClient } from '${CLIENT_PACKAGE}';`,
      '',
      'declare const subscriberToken: string; // from your backend: POST /subscribers/{subscriberId}/inbox-tokens',
      '',
      `const inbox = createInboxClient({ baseUrl: ${tsString(serverUrl)}, token: subscriberToken });`,
      '',
    ];
    // The stream never ends: it is read event by event, reconnecting and resuming by itself.
    if (operationId === 'streamInboxEvents') {
      return [
        ...inbox,
        '// Open until closed: stream.close() when the page no longer needs it.',
        'export const stream = inbox.subscribe({',
        '  onEvent: (event) => console.log(event.type, event),',
        "  onReset: () => console.log('missed events: fetch the feed again'),",
        '});',
      ].join('\n');
    }
    return [...inbox, ...call('inbox.api')].join('\n');
  }
  return [
    `import { createHeraldClient } from '${CLIENT_PACKAGE}';`,
    '',
    'const herald = createHeraldClient({',
    `  baseUrl: ${tsString(serverUrl)},`,
    '  apiKey: process.env.HERALD_API_KEY!,',
    '});',
    '',
    ...call('herald'),
  ].join('\n');
}

/** The curl and TypeScript samples of one operation. */
export function codeSamples(spec: Spec, apiPath: string, method: string): CodeSample[] {
  const request = exampleRequest(spec, apiPath, method);
  const baseUrl = String(spec.servers?.[0]?.url ?? 'http://localhost:3000/v1').replace(/\/+$/, '');
  return [
    { lang: 'Shell', label: 'curl', source: curlSample(request, baseUrl) },
    { lang: 'TypeScript', label: 'TypeScript', source: typescriptSample(request, baseUrl.replace(/\/v1$/, ''), String(spec.paths[apiPath][method].operationId)) },
  ];
}

/** Every operation of the contract: where it lives and its operationId. */
export function operationsOf(spec: Spec): Array<{ path: string; method: string; operationId: string }> {
  return Object.entries(spec.paths as Record<string, Node>).flatMap(([apiPath, pathItem]) =>
    METHODS.filter((method) => pathItem[method]).map((method) => ({ path: apiPath, method, operationId: pathItem[method].operationId })),
  );
}

/** A copy of the contract with `x-codeSamples` on every operation. */
export function withCodeSamples(spec: Spec): Spec {
  const copy = structuredClone(spec);
  for (const { path: apiPath, method } of operationsOf(copy)) {
    copy.paths[apiPath][method]['x-codeSamples'] = codeSamples(copy, apiPath, method);
  }
  return copy;
}

export function loadSpec(file = CONTRACT_PATH): Spec {
  return YAML.parse(fs.readFileSync(file, 'utf8'));
}

/**
 * The page's one request off its own host would be Redoc's footer logo, from cdn.redoc.ly: a reader
 * of the docs would tell a third party that they read them, and a page published offline would
 * show a broken image. The logo's address becomes an empty `data:` one, which is no image: Redoc
 * hides the logo when it cannot load, and the browser asks nothing of anyone (a policy that only
 * blocked it left a violation in every reader's console). The policy stays, for any other image.
 */
const IMAGES_FROM_THE_PAGE_ONLY = `<meta http-equiv="Content-Security-Policy" content="img-src 'self' data:">`;
const REDOC_LOGOS = /https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini(?:-full)?\.svg/g;

/** The page with IMAGES_FROM_THE_PAGE_ONLY first in its head, and Redoc's logo asked of no one. */
function withImagePolicy(html: string): string {
  const head = html.indexOf('<head>');
  if (head === -1) throw new Error('The rendered API reference has no <head>');
  const at = head + '<head>'.length;
  return `${html.slice(0, at)}\n  ${IMAGES_FROM_THE_PAGE_ONLY}${html.slice(at).replace(REDOC_LOGOS, 'data:,')}`;
}

/** Renders the enriched contract into `out`; the page appears there whole or not at all. */
export async function buildDocs(out = DEFAULT_DOCS_OUT): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'herald-docs-'));
  try {
    const enriched = path.join(work, 'v1.yaml');
    fs.writeFileSync(enriched, YAML.stringify(withCodeSamples(loadSpec()), { lineWidth: 0 }));
    const config = path.join(work, 'redocly.yaml');
    fs.writeFileSync(config, YAML.stringify(REDOC_CONFIG));
    const page = path.join(work, 'index.html');
    await promisify(execFile)(REDOCLY, ['build-docs', enriched, '--config', config, '--inlineBundle', '-o', page], {
      cwd: ROOT,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off' },
      maxBuffer: 16 * 1024 * 1024,
    });
    fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
    const partial = `${out}.${process.pid}.tmp`;
    fs.writeFileSync(partial, withImagePolicy(fs.readFileSync(page, 'utf8')));
    fs.renameSync(partial, out);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const { values } = parseArgs({ options: { out: { type: 'string' } } });
  const out = path.resolve(values.out ?? DEFAULT_DOCS_OUT);
  buildDocs(out).then(
    () => process.stdout.write(`Built the API reference: ${out}\n`),
    (err: unknown) => {
      const detail = err && typeof err === 'object' && 'stderr' in err ? String(err.stderr) : '';
      process.stderr.write(`Could not build the API reference: ${err instanceof Error ? err.message : String(err)}\n${detail}`);
      process.exit(1);
    },
  );
}
