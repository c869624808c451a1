import type { Db } from '../knex.js';
import type { Plan } from '../../config.js';
import type { Organization } from './accounts.js';
import { forgetKeyOwners } from '../key-owner-cache.js';

/** Every organization with its plan and stored numbers, oldest first. */
export async function listOrganizations(db: Db): Promise<Organization[]> {
  return db('organizations')
    .orderBy([{ column: 'created_at' }, { column: 'id' }])
    .select('id', 'name', 'plan', 'rate_per_minute as ratePerMinute', 'burst');
}

/**
 * Sets an organization's plan. The numbers count for Enterprise only (both null: no limit); other
 * plans have the fixed numbers of README's "Rate limits" table, so theirs are cleared. False when there is no such organization.
 * This process applies it from the next request; other running servers within HERALD_KEY_CACHE_MS
 * (the plan is read, and remembered, with the key).
 */
export async function setOrganizationPlan(
  db: Db,
  id: string,
  input: { plan: Plan; ratePerMinute: number | null; burst: number | null },
): Promise<boolean> {
  const numbers = input.plan === 'enterprise' ? input : { ratePerMinute: null, burst: null };
  const changed = await db('organizations')
    .where({ id })
    .update({ plan: input.plan, rate_per_minute: numbers.ratePerMinute, burst: numbers.burst });
  forgetKeyOwners(db);
  return changed > 0;
}
