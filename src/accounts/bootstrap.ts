import type { Db } from '../db/knex.js';
import type { Plan } from '../config.js';
import { hashApiKey } from '../api-keys.js';
import { countOrganizations, createApiKey, createOrganization, defaultEnvironmentId, findKeyOwner, underBootstrapLock } from '../db/repos/accounts.js';

export const DEFAULT_ENVIRONMENTS = ['development', 'production'];

export interface BootstrapResult {
  /** A key created on this start, in clear, to be shown once. */
  createdKey?: string;
}

/**
 * On an empty database: an organization with its environments and a first key. With `apiKey`:
 * make sure that key exists (in the default environment), so scripted setups know their key.
 */
export async function bootstrap(db: Db, options: { plan: Plan; apiKey?: string }): Promise<BootstrapResult> {
  return underBootstrapLock(db, async (trx) => {
    const result: BootstrapResult = {};
    if ((await countOrganizations(trx)) === 0) {
      await createOrganization(trx, { name: 'Default organization', plan: options.plan, environments: DEFAULT_ENVIRONMENTS });
      if (!options.apiKey) {
        const environmentId = (await defaultEnvironmentId(trx))!;
        result.createdKey = (await createApiKey(trx, { environmentId, name: 'First key' })).key;
      }
    }
    if (options.apiKey && !(await findKeyOwner(trx, hashApiKey(options.apiKey)))) {
      const environmentId = (await defaultEnvironmentId(trx))!;
      await createApiKey(trx, { environmentId, name: 'HERALD_API_KEY', key: options.apiKey });
    }
    return result;
  });
}
