import { loadSpec } from '../../scripts/docs.js';

// The contract read as plain YAML data.
export type Node = Record<string, any>;

export const spec = loadSpec();
const resolve = (node: Node): Node =>
  node?.$ref ? resolve((node.$ref as string).slice(2).split('/').reduce<Node>((at, key) => at[key], spec)) : node;

/** What the contract documents as an operation's answer: its first 2xx status and that status's first example. */
export function documentedAnswer(apiPath: string, method: string): { status: number; body: unknown } {
  const responses = spec.paths[apiPath][method].responses as Record<string, Node>;
  const status = Object.keys(responses).find((code) => /^2\d\d$/.test(code))!;
  const media = resolve(responses[status]).content?.['application/json'];
  const firstExample = media && (media.example ?? resolve(Object.values(media.examples ?? {})[0] as Node)?.value);
  return { status: Number(status), body: firstExample };
}

