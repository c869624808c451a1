// npm run keys -- create [--name N] [--plan free|pro|enterprise] | list | revoke <id>
//                | owner --email E [--password P] [--organization ID]
//                | inbox-secrets [rotate | retire <kid>] [--environment ID]
//
// The command-line twin of the dashboard's Settings → API keys. `create` prints the new key on its
// last line, so scripts can take it with `tail -n 1`.
import { parseArgs } from 'node:util';
import { loadConfig, PLANS, type Plan } from '../src/config.js';
import { checkedDatabaseUrl, createDb, migrate } from '../src/db/knex.js';
import { bootstrap, DEFAULT_ENVIRONMENTS } from '../src/accounts/bootstrap.js';
import {
  createApiKey,
  createOrganization,
  defaultEnvironmentId,
  defaultOrganizationId,
  findOrganization,
  listApiKeys,
  revokeApiKey,
} from '../src/db/repos/accounts.js';
import { hashPassword, MIN_PASSWORD_LENGTH } from '../src/accounts/passwords.js';
import { isKeyName, KEY_NAME_MAX } from '../src/api-keys.js';
import { saveOwner } from '../src/db/repos/owners.js';
import { runCli } from './cli.js';
import { settleSecret } from '../src/accounts/secret.js';
import { addSigningSecret, retireSigningSecret, signingSecrets } from '../src/engine/inbox-tokens.js';
import { inboxSettings } from '../src/engine/inbox-sessions.js';
import { createLogger } from '../src/logger.js';
import { systemClock } from '../src/clock.js';

const USAGE = `usage: npm run keys -- create [--name NAME] [--plan free|pro|enterprise]
       npm run keys -- list
       npm run keys -- revoke <key id>
       npm run keys -- owner --email EMAIL [--password PASSWORD] [--organization ID]
         (the dashboard's sign-in; without --password the first line of standard input is read)
       npm run keys -- inbox-secrets [--environment ID]          the inbox signing secrets (kid and secret), and the applicationIdentifier
       npm run keys -- inbox-secrets rotate [--environment ID]   a new secret signs; the oldest beyond two is retired
       npm run keys -- inbox-secrets retire <kid> [--environment ID]`;

/** The first line of standard input: a password piped in stays out of the shell's history. */
async function firstLineOfStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) {
    text += chunk;
    if (text.includes('\n')) break;
  }
  return text.split(/\r?\n/)[0];
}

async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      plan: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      organization: { type: 'string' },
      environment: { type: 'string' },
    },
  });
  const [command, ...rest] = positionals;
  const config = loadConfig();
  const db = createDb(checkedDatabaseUrl(config.databaseUrl));
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
        const name = values.name ?? 'API key';
        if (!isKeyName(name)) throw new Error(`--name must be 1 to ${KEY_NAME_MAX} characters`);
        const { id, key } = await createApiKey(db, { environmentId, name: name.trim() });
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
      case 'owner': {
        if (!values.email || !/^[^@\s]+@[^@\s]+$/.test(values.email)) throw new Error('--email must be an email address');
        const password = values.password ?? (await firstLineOfStdin());
        if (password.length < MIN_PASSWORD_LENGTH) throw new Error(`The password must have at least ${MIN_PASSWORD_LENGTH} characters`);
        const organizationId = values.organization ?? (await defaultOrganizationId(db))!;
        const organization = await findOrganization(db, organizationId);
        if (!organization) throw new Error(`No organization ${organizationId}`);
        const { created } = await saveOwner(db, { organizationId, email: values.email, passwordHash: await hashPassword(password), now: new Date() });
        process.stdout.write(
          `${created ? 'Created' : 'Updated'} owner ${values.email.toLowerCase()} of ${organization.name} (${organization.id}); sign in at /dashboard\n`,
        );
        return 0;
      }
      case 'inbox-secrets': {
        // The backend signs its subscriber tokens with these (README, "The inbox").
        const environmentId = values.environment ?? (await defaultEnvironmentId(db))!;
        const secret = await settleSecret(config, db, createLogger('silent'));
        const deps = { db, clock: systemClock, config: { ...config, secret }, logger: createLogger('silent') };
        const [action, kid] = rest;
        if (action === 'rotate') await addSigningSecret(deps, environmentId);
        else if (action === 'retire') {
          if (!kid || !(await retireSigningSecret(deps, environmentId, kid))) {
            process.stderr.write(`No inbox secret ${kid ?? ''} in environment ${environmentId}\n`);
            return 1;
          }
        } else if (action !== undefined) break;
        process.stdout.write(`Inbox signing secrets of environment ${environmentId}, newest (the one that signs) first:\n`);
        for (const s of await signingSecrets(deps, environmentId)) process.stdout.write(`kid ${s.kid}  secret ${s.secret}  created ${s.createdAt}\n`);
        // What a page that starts sessions from a subscriber hash needs besides the hash (README, "The inbox").
        const settings = await inboxSettings(deps, environmentId);
        process.stdout.write(`applicationIdentifier ${settings.applicationIdentifier}  sessions from a subscriber hash ${settings.subscriberHashSessions ? 'on' : 'off'}\n`);
        return 0;
      }
    }
    process.stderr.write(`${USAGE}\n`);
    return 2;
  } finally {
    await db.destroy();
  }
}

runCli(run);
