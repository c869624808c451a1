// npm run keys -- create [--name N] [--plan free|pro|enterprise] | list | revoke <id>
//
// The command-line twin of the dashboard's Settings → API keys. `create` prints the new key on its
// last line, so scripts can take it with `tail -n 1`.
import { parseArgs } from 'node:util';
import { loadConfig, PLANS, type Plan } from '../src/config.js';
import { createDb, migrate } from '../src/db/knex.js';
import { bootstrap, DEFAULT_ENVIRONMENTS } from '../src/accounts/bootstrap.js';
import { createApiKey, createOrganization, defaultEnvironmentId, listApiKeys, revokeApiKey } from '../src/db/repos/accounts.js';

const USAGE = `usage: npm run keys -- create [--name NAME] [--plan free|pro|enterprise]
       npm run keys -- list
       npm run keys -- revoke <key id>`;

async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' }, plan: { type: 'string' } },
  });
  const [command, ...rest] = positionals;
  const config = loadConfig();
  const db = createDb(config.databaseUrl);
  try {
    await migrate(db);
    await bootstrap(db, { plan: config.defaultPlan });
    switch (command) {
      case 'create': {
        let environmentId: string;
        if (values.plan) {
          if (!PLANS.includes(values.plan as Plan)) throw new Error(`--plan must be one of ${PLANS.join(', ')}`);
          const { environmentIds } = await createOrganization(db, {
            name: `${values.plan} organization`,
            plan: values.plan as Plan,
            environments: DEFAULT_ENVIRONMENTS,
          });
          environmentId = environmentIds[DEFAULT_ENVIRONMENTS[0]];
        } else {
          environmentId = (await defaultEnvironmentId(db))!;
        }
        const { id, key } = await createApiKey(db, { environmentId, name: values.name ?? 'API key' });
        process.stdout.write(`Created key ${id} in environment ${environmentId}. It is shown only now:\n${key}\n`);
        return 0;
      }
      case 'list': {
        for (const k of await listApiKeys(db)) {
          const state = k.revokedAt ? `revoked ${k.revokedAt}` : 'active';
          process.stdout.write(
            `${k.id}  ${k.prefix}…  ${k.name}  ${k.organizationName} (${k.plan}) / ${k.environmentName}  ${state}\n`,
          );
        }
        return 0;
      }
      case 'revoke': {
        const [id] = rest;
        if (!id) break;
        if (!(await revokeApiKey(db, id))) {
          process.stderr.write(`No active key with id ${id}\n`);
          return 1;
        }
        process.stdout.write(`Revoked key ${id}\n`);
        return 0;
      }
    }
    process.stderr.write(`${USAGE}\n`);
    return 2;
  } finally {
    await db.destroy();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
