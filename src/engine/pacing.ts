// Provider send limits: each send takes its turn in the windows of its integration's limits
// (`sendLimits`, else the provider's published ones) before it goes out. A turn in the future puts
// the job back in the queue until then, its attempt given back and its turn kept, so the sends to
// one destination leave in the order they reserved, with no crowd at each refill.
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

/** Forgets the windows that have been full for a while (a full window is the same as none). */
export async function forgetFullTurns(deps: Deps): Promise<void> {
  await forgetFullWindows(deps.db, deps.clock.now().getTime() - 60_000);
}
