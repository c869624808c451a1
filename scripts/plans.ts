// npm run plans -- list | set <organization id> --plan free|pro|enterprise [--rate N --burst N]
//                  | retention [<environment id> <days>|default]
//
// The operator's view of plans and rate limits: Free and Pro have the seed's numbers, Enterprise
// the organization's own (`--rate` requests per minute, a bucket of `--burst`), or none at all.
import { parseArgs } from 'node:util';
import { DEFAULT_RETENTION_DAYS, loadConfig, MAX_RETENTION_DAYS, PLANS, type Plan } from '../src/config.js';
import { checkedDatabaseUrl, createDb, migrate } from '../src/db/knex.js';
import { listOrganizations, setOrganizationPlan } from '../src/db/repos/plans.js';
import { listEnvironmentRetention, setEnvironmentRetention } from '../src/db/repos/retention.js';
import { policyFor } from '../src/http/rate-limit.js';
import { runCli } from './cli.js';

const USAGE = `usage: npm run plans -- list
       npm run plans -- set <organization id> --plan free|pro|enterprise [--rate N --burst N]
         (--rate requests per minute and --burst, both or neither, for enterprise only;
          enterprise without them has no limit)
       npm run plans -- retention
         (each environment's retention: how many days its notifications are kept)
       npm run plans -- retention <environment id> <days>|default
         (0 keeps them for ever; default follows HERALD_RETENTION_DAYS)`;

/** Per environment; at most this much, so the bucket arithmetic stays exact. */
const MAX_NUMBER = 1_000_000;

function describeLimit(organization: { plan: Plan; ratePerMinute: number | null; burst: number | null }): string {
  const policy = policyFor({ plan: organization.plan, ratePerMinute: organization.ratePerMinute, burst: organization.burst });
  return policy ? `${policy.ratePerMinute}/min, burst ${policy.burst}` : 'no limit';
}

function positiveInteger(name: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1 || n > MAX_NUMBER) {
    throw new Error(`--${name} must be a whole number from 1 to ${MAX_NUMBER}, not "${value}"`);
  }
  return n;
}

async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { plan: { type: 'string' }, rate: { type: 'string' }, burst: { type: 'string' } },
  });
  const [command, ...rest] = positionals;
  if (command === 'retention' && (rest.length === 0 || rest.length === 2)) return retention(rest);
  if (command !== 'list' && !(command === 'set' && rest.length === 1 && values.plan)) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }

  // Check the arguments before touching the database.
  let input: { plan: Plan; ratePerMinute: number | null; burst: number | null } | undefined;
  if (command === 'set') {
    const plan = values.plan as Plan;
    if (!PLANS.includes(plan)) throw new Error(`--plan must be one of ${PLANS.join(', ')}`);
    const hasRate = values.rate !== undefined;
    const hasBurst = values.burst !== undefined;
    if (plan !== 'enterprise' && (hasRate || hasBurst)) {
      throw new Error(`--rate and --burst are for enterprise only; ${plan} has its own numbers`);
    }
    if (hasRate !== hasBurst) throw new Error('--rate and --burst go together (or neither, for no limit)');
    input = {
      plan,
      ratePerMinute: hasRate ? positiveInteger('rate', values.rate!) : null,
      burst: hasBurst ? positiveInteger('burst', values.burst!) : null,
    };
  }

  const db = createDb(checkedDatabaseUrl(loadConfig().databaseUrl));
  try {
    await migrate(db);
    if (command === 'list') {
      for (const o of await listOrganizations(db)) {
        process.stdout.write(`${o.id}  ${o.name}  ${o.plan}  ${describeLimit(o)}\n`);
      }
      return 0;
    }
    const [id] = rest;
    if (!(await setOrganizationPlan(db, id, input!))) {
      process.stderr.write(`No organization ${id}\n`);
      return 1;
    }
    process.stdout.write(`Organization ${id} is on plan ${input!.plan}: ${describeLimit(input!)} per environment\n`);
    return 0;
  } finally {
    await db.destroy();
  }
}

/** Shows every environment's retention, or sets one's (days, or `default` for the server's). */
async function retention([environmentId, days]: string[]): Promise<number> {
  const config = loadConfig();
  let value: number | null = null;
  if (days !== undefined && days !== 'default') {
    if (!/^\d+$/.test(days) || Number(days) > MAX_RETENTION_DAYS) throw new Error(`days must be a whole number from 0 to ${MAX_RETENTION_DAYS}, or default, not "${days}"`);
    value = Number(days);
  }
  const kept = (days: number) => (days === 0 ? 'for ever' : `${days} day${days === 1 ? '' : 's'}`);
  // This command cannot see the server's environment, only its own shell's.
  const serverDefault = `the server's HERALD_RETENTION_DAYS (${
    process.env.HERALD_RETENTION_DAYS ? `${kept(config.retentionDays)} if set as in this shell` : `${kept(DEFAULT_RETENTION_DAYS)} where it is unset`
  })`;
  const describeRetention = (own: number | null) => (own === null ? serverDefault : kept(own));
  const db = createDb(checkedDatabaseUrl(config.databaseUrl));
  try {
    await migrate(db);
    if (environmentId === undefined) {
      for (const e of await listEnvironmentRetention(db)) process.stdout.write(`${e.id}  ${e.organizationId}  ${e.name}  ${describeRetention(e.retentionDays)}\n`);
      return 0;
    }
    if (!(await setEnvironmentRetention(db, environmentId, value))) {
      process.stderr.write(`No environment ${environmentId}\n`);
      return 1;
    }
    process.stdout.write(`Environment ${environmentId} keeps its notifications ${describeRetention(value)}\n`);
    return 0;
  } finally {
    await db.destroy();
  }
}

runCli(run);
