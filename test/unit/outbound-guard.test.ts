import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DEFAULT_PROVIDER_TIMEOUTS, hostProblem, isAllowedAddress, parseNetworks, urlProblem } from '../../src/outbound-guard.js';

describe('isAllowedAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.1', 'loopback, shortened'],
    ['2130706433', 'loopback, decimal'],
    ['0x7f000001', 'loopback, hex'],
    ['0177.0.0.1', 'loopback, octal'],
    ['::1', 'IPv6 loopback'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
    ['::127.0.0.1', 'IPv4-compatible loopback'],
    ['64:ff9b::7f00:1', 'NAT64 of loopback'],
    ['64:ff9b:1::a00:1', 'local-use NAT64'],
    ['2002:7f00:1::', '6to4 of loopback'],
    ['169.254.169.254', 'cloud metadata (link-local)'],
    ['fd00:ec2::254', 'cloud metadata over IPv6 (unique-local)'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared (carrier-grade NAT)'],
    ['100.100.100.200', 'shared, a cloud metadata address'],
    ['fc00::1', 'unique-local'],
    ['fe80::1', 'IPv6 link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'this network'],
    ['::', 'IPv6 unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'IPv6 multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['2001:db8::1', 'IPv6 documentation'],
    ['not-an-address', 'not an address'],
  ])('refuses %s (%s)', (address) => {
    expect(isAllowedAddress(address)).toBe(false);
  });

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:93.184.216.34'])('allows the public address %s', (address) => {
    expect(isAllowedAddress(address)).toBe(true);
  });

  it('allows what the operator lists, in either family and spelling, and nothing next to it', () => {
    const allowed = parseNetworks('127.0.0.1/32, 10.0.0.0/8,fd00::/8');
    expect(isAllowedAddress('127.0.0.1', allowed)).toBe(true);
    expect(isAllowedAddress('::ffff:127.0.0.1', allowed)).toBe(true);
    expect(isAllowedAddress('127.1', allowed)).toBe(true);
    expect(isAllowedAddress('127.0.0.2', allowed)).toBe(false);
    expect(isAllowedAddress('10.200.3.4', allowed)).toBe(true);
    expect(isAllowedAddress('fd12::1', allowed)).toBe(true);
    expect(isAllowedAddress('fc00::1', allowed)).toBe(false);
    expect(isAllowedAddress('::ffff:10.0.0.1', ['::ffff:10.0.0.0/104'])).toBe(true);
  });
});

describe('urlProblem and hostProblem', () => {
  it('take public http(s) URLs and names, and refuse the rest by spelling', () => {
    expect(urlProblem('https://hooks.slack.com/services/T/B/x')).toBeUndefined();
    expect(urlProblem('http://93.184.216.34:8080/x')).toBeUndefined();
    expect(urlProblem('ftp://example.com/')).toBe('must be an http or https URL');
    expect(urlProblem('relative/path')).toBe('must be an absolute http or https URL');
    expect(urlProblem('https://user:pw@example.com/')).toBe('must not carry a user name or password');
    expect(urlProblem('http://[::ffff:169.254.169.254]/')).toBe('must be a public address');
    expect(urlProblem('http://LocalHost./')).toBe('must be a public address');
    expect(hostProblem('smtp.example.com')).toBeUndefined();
    expect(hostProblem('127.000.000.001')).toBe('must be a public address');
    expect(hostProblem('0x7f.1')).toBe('must be a public address');
    expect(hostProblem('metadata.google.internal')).toBe('must be a public address');
    expect(hostProblem('mail.localhost')).toBe('must be a public address');
    expect(hostProblem('10.1.2.3', ['10.0.0.0/8'])).toBeUndefined();
    // What DNS cannot hold is no host to keep.
    for (const odd of ['evil.com@127.0.0.1', '１２７.０.０.１', '127.0.0.1%09', 'a b.example', `${'a'.repeat(64)}.example`, '-mail.example']) {
      expect(hostProblem(odd), odd).toBe('must be a host name (letters, digits, hyphens and dots) or an IP address');
    }
    expect(hostProblem('xn--bcher-kva.example')).toBeUndefined();
    expect(hostProblem('SMTP.Example.com.')).toBeUndefined();
  });
});

describe('configuration', () => {
  it('reads HERALD_ALLOWED_NETWORKS and the provider timeouts, with documented defaults', () => {
    expect(loadConfig({}).outbound).toEqual({ allowedNetworks: [], timeouts: DEFAULT_PROVIDER_TIMEOUTS });
    expect(DEFAULT_PROVIDER_TIMEOUTS).toEqual({ connectMs: 5_000, firstByteMs: 10_000, sendMs: 20_000 });
    const config = loadConfig({
      HERALD_ALLOWED_NETWORKS: '10.0.0.0/8,192.168.1.10',
      HERALD_PROVIDER_CONNECT_TIMEOUT_MS: '100',
      HERALD_PROVIDER_FIRST_BYTE_TIMEOUT_MS: '200',
      HERALD_PROVIDER_SEND_TIMEOUT_MS: '300',
    });
    expect(config.outbound).toEqual({ allowedNetworks: ['10.0.0.0/8', '192.168.1.10'], timeouts: { connectMs: 100, firstByteMs: 200, sendMs: 300 } });
  });

  it('refuses a network that is not a CIDR, and a timeout that is not a whole number of ms a timer holds', () => {
    expect(() => loadConfig({ HERALD_ALLOWED_NETWORKS: '10.0.0.0/8,intranet' })).toThrow('HERALD_ALLOWED_NETWORKS must be comma-separated CIDRs');
    expect(() => loadConfig({ HERALD_ALLOWED_NETWORKS: '10.0.0.0/33' })).toThrow('HERALD_ALLOWED_NETWORKS');
    expect(() => loadConfig({ HERALD_PROVIDER_SEND_TIMEOUT_MS: '0' })).toThrow('HERALD_PROVIDER_SEND_TIMEOUT_MS must be a whole number from 1 to 2147483647, not "0"');
  });
});
