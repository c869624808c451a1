// The bounds and breakers of destinations, on a clock moved by hand: what the runner's tests with
// real webhooks show end to end, here step by step.
import { describe, expect, it } from 'vitest';
import { Destinations, destinationOf, isRateLimited, verdictOf, type Admission } from '../../src/engine/destinations.js';
import { ProviderError } from '../../src/providers/types.js';
import { loadConfig, DEFAULT_DELIVERY } from '../../src/config.js';

function setup(options: Partial<ConstructorParameters<typeof Destinations>[0]> = {}) {
  let now = 1_000_000;
  // As many places while slow as when quick, but where a test says otherwise.
  const destinations = new Destinations({ perDestination: 2, slowPerDestination: 2, failures: 3, cooldownMs: 1_000, maxCooldownMs: 4_000, ...options }, () => now, () => 0.5);
  return { destinations, advance: (ms: number) => (now += ms), now: () => now };
}

const started = (admission: Admission) => {
  if (!admission.go) throw new Error(`deferred until ${admission.until.toISOString()}`);
  return admission.started;
};

describe('destinations', () => {
  it('forgets idle destinations once it remembers 10,000, but not those at work or with an open breaker', async () => {
    const { destinations, advance } = setup();
    started(await destinations.admit('chat:i:busy.example'));
    for (let i = 0; i < 3; i++) destinations.finished('chat:i:open.example', 'failed', started(await destinations.admit('chat:i:open.example')));
    expect(destinations.isOpen('chat:i:open.example')).toBe(true);
    // Hosts that failed once each: remembered, each with its failure, until the count is reached.
    for (let i = 0; i < 10_000; i++) {
      const host = `chat:i:h${i}.example`;
      destinations.finished(host, 'failed', started(await destinations.admit(host)));
    }
    expect(destinations.size).toBeLessThan(10_000);
    expect(destinations.isOpen('chat:i:open.example')).toBe(true);
    // The busy one still counts its send in flight: a second goes, a third (both slow by now) does not.
    started(await destinations.admit('chat:i:busy.example'));
    advance(2_000);
    expect((await destinations.admit('chat:i:busy.example')).go).toBe(false);
  });

  it('lets a bounded number of sends through, and defers the next one at a slow destination', async () => {
    const { destinations, advance, now } = setup();
    const a = started(await destinations.admit('chat:i1:slow.example'));
    started(await destinations.admit('chat:i1:slow.example'));
    // Another destination is not held up.
    started(await destinations.admit('chat:i1:other.example'));
    advance(2_000); // the two sends are out for 2 s: slow
    const third = await destinations.admit('chat:i1:slow.example');
    expect(third.go).toBe(false);
    if (!third.go) {
      expect(third.why).toBeUndefined(); // busy, not broken: no execution detail
      // Back in the queue for about as long as the sends there have taken so far.
      expect(third.until.getTime() - now()).toBe(2_000);
    }
    destinations.finished('chat:i1:slow.example', 'ok', a);
    started(await destinations.admit('chat:i1:slow.example'));
  });

  it("says a full destination's other sends must wait too only while its sends in flight hang, not while it answers slowly", async () => {
    const { destinations, advance } = setup();
    const turnedAway = async (destination: string) => {
      const admission = await destinations.admit(destination);
      if (admission.go) throw new Error('admitted');
      return admission.allUntil === true;
    };
    // Answers in 5 s: slow, full, but a place frees every answer.
    const answering = 'webhook:e1:slow.example';
    for (let i = 0; i < 3; i++) {
      const a = started(await destinations.admit(answering));
      const b = started(await destinations.admit(answering));
      advance(5_000);
      destinations.finished(answering, 'ok', a);
      destinations.finished(answering, 'ok', b);
    }
    started(await destinations.admit(answering));
    started(await destinations.admit(answering));
    advance(4_000);
    expect(await turnedAway(answering)).toBe(false);
    advance(6_000); // its oldest send in flight is now past twice its usual answer
    expect(await turnedAway(answering)).toBe(true);
    // Never answered, its two sends out for a second: they hang.
    const silent = 'webhook:e2:silent.example';
    started(await destinations.admit(silent));
    started(await destinations.admit(silent));
    advance(1_000);
    expect(await turnedAway(silent)).toBe(true);
    // An open breaker turns every send away.
    for (let i = 0; i < 3; i++) destinations.finished('webhook:e3:broken.example', 'failed', started(await destinations.admit('webhook:e3:broken.example')));
    expect(await turnedAway('webhook:e3:broken.example')).toBe(true);
  });

  it("does not hold a quick destination's other sends back for one send hung among them", async () => {
    const { destinations, advance } = setup({ perDestination: 4, slowPerDestination: 4 });
    const quick = 'webhook:e4:quick.example';
    for (let i = 0; i < 3; i++) {
      const a = started(await destinations.admit(quick));
      advance(50);
      destinations.finished(quick, 'ok', a);
    }
    started(await destinations.admit(quick)); // hangs
    advance(2_000);
    for (let i = 0; i < 3; i++) started(await destinations.admit(quick)); // just sent
    const admission = await destinations.admit(quick);
    expect(admission.go === false && admission.allUntil).toBe(false);
    // All its places but one held by sends that hang: then they wait together.
    advance(2_000);
    const later = await destinations.admit(quick);
    expect(later.go === false && later.allUntil).toBe(true);
  });

  it('lets fewer sends through to a destination that has not answered yet, or is slow, than to a quick one', async () => {
    const { destinations, advance } = setup({ perDestination: 8, slowPerDestination: undefined });
    const admitted = async (destination: string) => {
      const starts: number[] = [];
      for (let admission = await destinations.admit(destination); admission.go; admission = await destinations.admit(destination)) starts.push(admission.started);
      return starts;
    };
    // New: a quarter of its places until a send there ends (the next waits a second for a place, then comes back).
    const first = await admitted('webhook:e1:hooks.example');
    expect(first).toHaveLength(2);
    // A quick answer: every place.
    destinations.finished('webhook:e1:hooks.example', 'ok', first[0]);
    const quick = await admitted('webhook:e1:hooks.example');
    expect(quick).toHaveLength(7);
    // Its sends out for over a second: slow, a quarter again as they end.
    advance(1_500);
    for (const at of [first[1], ...quick.slice(0, 6)]) destinations.finished('webhook:e1:hooks.example', 'neutral', at);
    expect(await admitted('webhook:e1:hooks.example')).toHaveLength(1);
  });

  it('hands a place at a quick, busy destination to the send waiting for it', async () => {
    const { destinations } = setup({ perDestination: 1 });
    const first = started(await destinations.admit('sms:i2'));
    const waiting = destinations.admit('sms:i2');
    destinations.finished('sms:i2', 'ok', first);
    expect((await waiting).go).toBe(true);
  });

  it('opens after failures in a row, defers with a reason, lets one probe through after the cooldown, and closes on its success', async () => {
    const { destinations, advance } = setup({ perDestination: 10 });
    for (let i = 0; i < 3; i++) destinations.finished('email:i3', 'failed', started(await destinations.admit('email:i3')));
    expect(destinations.isOpen('email:i3')).toBe(true);
    const deferred = await destinations.admit('email:i3');
    expect(deferred).toMatchObject({ go: false, why: expect.stringMatching(/^The email integration i3 failed 3 times in a row; its sends wait until /) });
    advance(1_000);
    const probe = started(await destinations.admit('email:i3'));
    // While the probe is out, the others still wait.
    expect((await destinations.admit('email:i3')).go).toBe(false);
    destinations.finished('email:i3', 'ok', probe);
    expect(destinations.isOpen('email:i3')).toBe(false);
    started(await destinations.admit('email:i3'));
  });

  it('waits twice as long after a failed probe, up to the longest wait', async () => {
    const { destinations, advance, now } = setup({ perDestination: 10 });
    for (let i = 0; i < 3; i++) destinations.finished('push:i4', 'failed', started(await destinations.admit('push:i4')));
    let wait = 1_000;
    for (const next of [2_000, 4_000, 4_000]) {
      advance(wait);
      destinations.finished('push:i4', 'failed', started(await destinations.admit('push:i4')));
      const after = await destinations.admit('push:i4');
      expect(after.go).toBe(false);
      if (!after.go) expect(after.until.getTime() - now()).toBeGreaterThanOrEqual(next);
      wait = next;
    }
  });

  it('counts a 4xx as the destination working, and neither a 429 nor a refused address', async () => {
    expect(verdictOf(new ProviderError('hooks.example answered 404', true, '404 no', undefined, 'rejected'))).toBe('ok');
    expect(verdictOf(new ProviderError('hooks.example answered 503', false, '503 down', undefined, 'http-5xx'))).toBe('failed');
    expect(verdictOf(new ProviderError('Could not reach hooks.example: no answer within 10 s', false, undefined, undefined, 'timeout'))).toBe('failed');
    expect(verdictOf(new ProviderError('Could not reach hooks.example', false))).toBe('failed');
    const paced = new ProviderError('hooks.example answered 429', false, '429 slow down', 5_000, 'rate-limited');
    expect(isRateLimited(paced)).toBe(true);
    expect(verdictOf(paced)).toBe('neutral');
    expect(verdictOf(new ProviderError('Destination refused', true, undefined, undefined, 'refused'))).toBe('neutral');
  });

  it('names a webhook destination by its integration and host', () => {
    expect(destinationOf('chat', 'int-1', 'https://hooks.slack.com/services/T/B/x')).toBe('chat:int-1:hooks.slack.com');
    expect(destinationOf('chat', 'int-1', 'http://127.0.0.1:8080/hook')).toBe('chat:int-1:127.0.0.1:8080');
    expect(destinationOf('sms', 'int-2')).toBe('sms:int-2');
  });
});

describe('delivery settings', () => {
  it('has documented defaults, and takes each from its environment variable', () => {
    expect(loadConfig({}).delivery).toEqual({ ...DEFAULT_DELIVERY, sendSlotsPerOrganization: 32 });
    const delivery = loadConfig({ HERALD_SEND_SLOTS: '10', HERALD_SENDS_PER_DESTINATION: '3', HERALD_BREAKER_FAILURES: '2', HERALD_RUNNER_COALESCE_MS: '0' }).delivery;
    expect(delivery).toMatchObject({ sendSlots: 10, sendSlotsPerOrganization: 5, sendsPerDestination: 3, breakerFailures: 2, coalesceMs: 0 });
    expect(loadConfig({ HERALD_SEND_SLOTS: '10', HERALD_SEND_SLOTS_PER_ORGANIZATION: '7' }).delivery.sendSlotsPerOrganization).toBe(7);
    // Its older name still sets it; neither more than the slots.
    expect(loadConfig({ HERALD_SEND_SLOTS: '10', HERALD_SEND_SLOTS_PER_ENVIRONMENT: '4' }).delivery.sendSlotsPerOrganization).toBe(4);
    expect(loadConfig({ HERALD_SEND_SLOTS: '10', HERALD_SEND_SLOTS_PER_ORGANIZATION: '40' }).delivery.sendSlotsPerOrganization).toBe(10);
    expect(() => loadConfig({ HERALD_SEND_SLOTS: '0' })).toThrow(/HERALD_SEND_SLOTS must be a positive whole number/);
  });
});
