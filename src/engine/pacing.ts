// Turns in windows every worker process shares (send-turns.ts): a provider's send limits (an
// integration's `sendLimits`, else the provider's published ones) and a webhook endpoint's
// rateLimitPerSecond. A turn in the future puts the job or delivery back in the queue until then,
// its attempt given back and its turn kept, so the sends to one destination leave in the order they
// reserved, with no crowd at each refill.
import type { Deps } from '../deps.js';
import { forgetFullWindows, reserveTurn, type TurnWindow } from '../db/repos/send-turns.js';
import { sendLimitsOf } from '../providers/catalogue.js';
import type { DecidedSend } from './deliver.js';

/** The windows a send counts against: its integration's, and its destination's (the integration's own, without an address). */
function windowsOf(send: DecidedSend): TurnWindow[] {
  const { integrationId, providerId, sendLimits } = send.target;
  const limits = sendLimitsOf(providerId, sendLimits);
  const integration = `integration:${integrationId}`;
  const destination = send.address === undefined ? integration : `destination:${integrationId}:${send.address}`;
  return [
    ...limits.perIntegration.map((w) => ({ scope: integration, limit: w.limit, windowMs: w.seconds * 1000 })),
    ...limits.perDestination.map((w) => ({ scope: destination, limit: w.limit, windowMs: w.seconds * 1000 })),
  ];
}

/** Takes the send's turn: undefined when it may go now, else when it may. */
export async function takeTurn(deps: Deps, send: DecidedSend): Promise<Date | undefined> {
  const windows = windowsOf(send);
  if (windows.length === 0) return undefined;
  const now = deps.clock.now().getTime();
  const at = await reserveTurn(deps.db, windows, send.cost, now);
  return at > now ? new Date(at) : undefined;
}

/** An endpoint's turn under its rateLimitPerSecond: when it may go, and whether that turn is now its own. */
export interface EndpointTurn {
  at: Date;
  /** False past `aheadMs`: the turn was not taken, the delivery asks again then. */
  taken: boolean;
}

/**
 * Takes a webhook delivery's turn under its endpoint's rateLimitPerSecond, in the same shared
 * windows as the send limits, so every worker process counts against one bucket: a burst of that
 * many, then one every 1/rate s. The rate is in the window's key: a new rate starts afresh.
 * Undefined when it may go now.
 */
export async function takeEndpointTurn(deps: Deps, endpointId: string, perSecond: number, aheadMs: number): Promise<EndpointTurn | undefined> {
  const now = deps.clock.now().getTime();
  const at = await reserveTurn(deps.db, [{ scope: `webhook-endpoint:${endpointId}`, limit: perSecond, windowMs: 1000 }], 1, now, aheadMs);
  if (at <= now) return undefined;
  return at - now > aheadMs ? { at: new Date(now + aheadMs), taken: false } : { at: new Date(at), taken: true };
}

/** Forgets the windows that have been full for a while (a full window is the same as none). */
export async function forgetFullTurns(deps: Deps): Promise<void> {
  await forgetFullWindows(deps.db, deps.clock.now().getTime() - 60_000);
}
