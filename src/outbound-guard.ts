import dns from 'node:dns';
import ipaddr from 'ipaddr.js';
import { BoundedMap } from './bounded-map.js';

/**
 * Where Herald may send, and how long a send may take. Tenants give us URLs and hosts (chat webhooks,
 * push-webhook URLs, a provider's `baseUrl`, an SMTP host); without this guard any of them could make
 * the server connect to its own network (loopback, cloud metadata, private ranges) and show back what
 * answered. Only public unicast addresses are reached, unless the operator lists a network in
 * HERALD_ALLOWED_NETWORKS. Writes check the spelling (`urlProblem`, `hostProblem`); sends check
 * every address a name resolves to and connect to the address that was checked
 * (`resolveDestination`), so a name cannot resolve to a public address for the check and a private
 * one for the connection.
 */

export interface ProviderTimeouts {
  /** From the start of a send until the connection is open (DNS included). */
  connectMs: number;
  /** From the open connection until the first byte of the answer (SMTP: the greeting, and each reply). */
  firstByteMs: number;
  /** The whole send, reading the answer included: a peer that drips bytes ends here. */
  sendMs: number;
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a name to every address it has (the system resolver by default; tests give their own). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface OutboundPolicy {
  /** CIDRs the operator allows even though they are not public (self-hosted receivers, tests). */
  allowedNetworks: readonly string[];
  timeouts: ProviderTimeouts;
  resolve?: Resolver;
}

export const DEFAULT_PROVIDER_TIMEOUTS: ProviderTimeouts = { connectMs: 5_000, firstByteMs: 10_000, sendMs: 20_000 };
export const DEFAULT_OUTBOUND_POLICY: OutboundPolicy = { allowedNetworks: [], timeouts: DEFAULT_PROVIDER_TIMEOUTS };

/**
 * The one reason given for a destination Herald will not reach. It is the same whatever the address
 * is and whether anything listens there or the name resolves at all, so it tells nothing of the
 * network behind the server.
 */
export const REFUSED_DESTINATION = 'Destination refused: Herald sends only to public http(s) addresses (see HERALD_ALLOWED_NETWORKS)';

/** A destination the guard will not reach; `permanent` because retrying cannot change the answer. */
export class DestinationRefused extends Error {
  override readonly name = 'DestinationRefused';
  constructor() {
    super(REFUSED_DESTINATION);
  }
}

/** Names that always mean this machine or a cloud's metadata service, whatever DNS says. */
const LOCAL_NAMES = [/^localhost$/, /\.localhost$/, /^metadata\.google\.internal$/, /^metadata\.goog$/, /^instance-data(\.ec2\.internal)?$/];

/** Parses comma-separated CIDRs (HERALD_ALLOWED_NETWORKS); a bare address is a network of one. Throws on a bad entry. */
export function parseNetworks(text: string | undefined): string[] {
  if (!text || text.trim() === '') return [];
  return text.split(',').map((entry) => {
    const cidr = entry.trim();
    try {
      if (cidr.includes('/')) ipaddr.parseCIDR(cidr);
      else ipaddr.parse(cidr);
    } catch {
      throw new Error(`HERALD_ALLOWED_NETWORKS must be comma-separated CIDRs (e.g. 10.0.0.0/8,fd00::/8), not "${cidr}"`);
    }
    return cidr;
  });
}

type Network = readonly [base: ipaddr.IPv4 | ipaddr.IPv6, bits: number];

/** Allowed networks as parsed once: every send checks its address against them. */
const parsedNetworks = new BoundedMap<string, Network>(1_000);

function networkOf(cidr: string): Network {
  let parsed = parsedNetworks.get(cidr);
  if (parsed) return parsed;
  const [network, bits] = cidr.includes('/')
    ? ipaddr.parseCIDR(cidr)
    : (() => {
        const one = ipaddr.process(cidr);
        return [one, one.kind() === 'ipv4' ? 32 : 128] as const;
      })();
  const base = network.kind() === 'ipv6' && (network as ipaddr.IPv6).isIPv4MappedAddress() ? (network as ipaddr.IPv6).toIPv4Address() : network;
  parsed = [base, base !== network ? bits - 96 : bits];
  parsedNetworks.set(cidr, parsed);
  return parsed;
}

function inNetwork(address: ipaddr.IPv4 | ipaddr.IPv6, cidr: string): boolean {
  const [base, bits] = networkOf(cidr);
  return base.kind() === address.kind() && address.match(base, bits);
}

/** 0:0:0:0:0:0/96 (IPv4-compatible, deprecated) is "unicast" to ipaddr.js, yet it embeds any IPv4 address. */
function embedsIPv4(address: ipaddr.IPv6): boolean {
  const parts = address.parts;
  return parts.slice(0, 6).every((part) => part === 0);
}

/**
 * Whether Herald may connect to this address (any spelling ipaddr.js reads: shortened, decimal, hex
 * or octal IPv4, IPv4-mapped IPv6): an address in an allowed network, or a public unicast one.
 * NAT64, 6to4, Teredo and the IPv4-compatible block are refused too: each can carry a private IPv4.
 */
export function isAllowedAddress(text: string, allowedNetworks: readonly string[] = []): boolean {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (!ipaddr.isValid(bare)) return false;
  const address = ipaddr.process(bare);
  if (allowedNetworks.some((cidr) => inNetwork(address, cidr))) return true;
  if (address.range() !== 'unicast') return false;
  return !(address.kind() === 'ipv6' && embedsIPv4(address as ipaddr.IPv6));
}

export function isIpLiteral(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return ipaddr.isValid(bare);
}

function normalName(host: string): string {
  return host.toLowerCase().replace(/\.+$/, '');
}

/**
 * What is wrong with a host name or address a tenant gives (an SMTP host, a URL's host), judged by
 * its spelling alone: undefined when it may be kept. Names are judged again, by their addresses,
 * when Herald connects.
 */
export function hostProblem(host: string, allowedNetworks: readonly string[] = []): string | undefined {
  const name = normalName(host.trim());
  if (name === '') return 'must name a host';
  if (isIpLiteral(name)) return isAllowedAddress(name, allowedNetworks) ? undefined : 'must be a public address';
  if (/^[\d.]+$/.test(name) || /^0x/i.test(name)) return 'must be a public address'; // an IPv4 spelling ipaddr.js does not read
  if (LOCAL_NAMES.some((pattern) => pattern.test(name))) return 'must be a public address';
  // Only what DNS can hold: an SMTP host such as `evil.com@127.0.0.1`, `127.0.0.1%09` or full-width
  // digits is no name to keep (a URL's host reaches here already normalized by the URL parser).
  if (name.length > 253 || !HOST_NAME.test(name)) return 'must be a host name (letters, digits, hyphens and dots) or an IP address';
  return undefined;
}

const HOST_NAME = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** What is wrong with a URL a tenant gives (a webhook, a provider's `baseUrl`): undefined when it may be kept. */
export function urlProblem(text: string, allowedNetworks: readonly string[] = []): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (url.username || url.password) return 'must not carry a user name or password';
  // The WHATWG parser already spells odd IPv4 forms (127.1, 0x7f000001, 2130706433) as dotted quads.
  return hostProblem(url.hostname, allowedNetworks);
}

const systemResolver: Resolver = async (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/**
 * The address to connect to for `host`: the host itself when it is an address, else the first
 * address its name resolves to, once every one of them was checked. Throws DestinationRefused for a
 * refused host, a name with any refused address, or a name that does not resolve (the same error,
 * so a refusal says nothing of what exists behind the server); a resolver that fails for a while
 * (EAI_AGAIN) is an ordinary error, worth retrying.
 */
export async function resolveDestination(host: string, policy: OutboundPolicy): Promise<ResolvedAddress> {
  const name = normalName(host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);
  if (isIpLiteral(name)) {
    if (!isAllowedAddress(name, policy.allowedNetworks)) throw new DestinationRefused();
    const address = ipaddr.process(name);
    return { address: address.toString(), family: address.kind() === 'ipv4' ? 4 : 6 };
  }
  if (hostProblem(name, policy.allowedNetworks)) throw new DestinationRefused();
  let addresses: ResolvedAddress[];
  try {
    addresses = await (policy.resolve ?? systemResolver)(name);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'EAI_AGAIN' || code === 'ETIMEOUT') throw err;
    throw new DestinationRefused();
  }
  if (addresses.length === 0 || addresses.some((entry) => !isAllowedAddress(entry.address, policy.allowedNetworks))) {
    throw new DestinationRefused();
  }
  const first = ipaddr.process(addresses[0].address);
  return { address: first.toString(), family: first.kind() === 'ipv4' ? 4 : 6 };
}
