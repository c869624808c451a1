// The house's rules (ARCHITECTURE.md), read from the imports of src/: each room imports only what
// the map's table lets it, nothing imports in a circle, and the database's dialects stay under src/db/.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

const IMPORT = /^\s*(?:import|export)\s(?:type\s)?[^'"]*?from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;

interface Module {
  /** Path under src/, e.g. `db/repos/jobs.ts`. */
  name: string;
  text: string;
  /** Modules of src/ it imports (paths under src/), and the packages it imports by name. */
  local: string[];
  packages: string[];
  /** What it imports from beside src/ (paths from the repository's root, e.g. `generated/v1.ts`). */
  outside: string[];
}

function readModules(): Module[] {
  return filesUnder(SRC).map((file) => {
    const text = fs.readFileSync(file, 'utf8');
    const local: string[] = [];
    const packages: string[] = [];
    const outside: string[] = [];
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2] ?? match[3];
      if (spec.startsWith('.')) {
        const target = path.relative(SRC, path.resolve(path.dirname(file), spec)).replace(/\.js$/, '.ts');
        if (!target.startsWith('..')) local.push(target);
        else outside.push(path.relative(path.dirname(SRC), path.resolve(path.dirname(file), spec)).replace(/\.js$/, '.ts'));
      } else {
        packages.push(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    }
    return { name: path.relative(SRC, file), text, local, packages, outside };
  });
}

const modules = readModules();
const room = (name: string) => (name.includes('/') ? name.split('/')[0] : name);
/** The files at the top of src/ that every room may use: they import no room themselves. */
const FOUNDATION = ['contract.ts', 'errors.ts', 'answer-memory.ts', 'json-schema.ts', 'ids.ts', 'clock.ts', 'config.ts', 'logger.ts', 'crypto.ts', 'api-keys.ts', 'paths.ts', 'metrics.ts', 'outbound-guard.ts', 'bounded-map.ts', 'escape-html.ts', 'turns.ts', 'raw-json.ts'];

/**
 * What each room may import besides itself, the foundation and `deps.ts`: ARCHITECTURE.md's table.
 * A room is a folder of src/ or a file at its top; an entry names a room, or one file of a room.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  'main.ts': ['app.ts', 'http', 'handlers', 'dashboard', 'engine', 'accounts', 'providers', 'db'],
  'app.ts': ['http', 'handlers', 'dashboard', 'engine', 'db'],
  http: ['engine', 'db'],
  dashboard: ['accounts', 'engine', 'db', 'http/request-body.ts'],
  handlers: ['engine', 'db', 'http/types.ts'],
  engine: ['db', 'providers'],
  accounts: ['db'],
  providers: [],
  db: ['providers/catalogue.ts'],
  'deps.ts': ['db/knex.ts'],
};

function importsOf(rooms: string[]) {
  return modules.filter((m) => rooms.includes(room(m.name)));
}

function offending(from: string[], forbidden: (target: string) => boolean): string[] {
  return importsOf(from).flatMap((m) => m.local.filter(forbidden).map((target) => `${m.name} -> ${target}`));
}

describe('the layers of src/', () => {
  it('reads the imports of every module (the rules below have something to check)', () => {
    expect(modules.length).toBeGreaterThan(80);
    expect(modules.find((m) => m.name === 'engine/trigger.ts')?.local).toContain('db/repos/jobs.ts');
    expect(modules.find((m) => m.name === 'contract.ts')?.outside).toEqual(['generated/v1.ts']);
  });

  it('knows every room of src/, and each room imports only what ARCHITECTURE.md lets it', () => {
    const rooms = new Set(modules.map((m) => room(m.name)).filter((name) => !FOUNDATION.includes(name) && name !== 'client'));
    expect([...rooms].sort()).toEqual(Object.keys(MAY_IMPORT).sort());
    const allowed = (from: string, target: string) =>
      room(target) === from || FOUNDATION.includes(target) || target === 'deps.ts' || MAY_IMPORT[from].some((entry) => entry === target || entry === room(target));
    const climbing = modules
      .filter((m) => room(m.name) in MAY_IMPORT)
      .flatMap((m) => m.local.filter((target) => !allowed(room(m.name), target)).map((target) => `${m.name} -> ${target}`));
    expect(climbing).toEqual([]);
  });

  it('lets only contract.ts and client/ read generated/, and nothing else beside src/', () => {
    const reaching = modules.flatMap((m) => m.outside.filter((target) => !(target.startsWith('generated/') && (m.name === 'contract.ts' || room(m.name) === 'client'))).map((target) => `${m.name} -> ${target}`));
    expect(reaching).toEqual([]);
  });

  it('keeps the foundation free of every room', () => {
    const foundation = modules.filter((m) => FOUNDATION.includes(m.name));
    expect(foundation.length).toBe(FOUNDATION.filter((name) => fs.existsSync(path.join(SRC, name))).length);
    const climbing = foundation.flatMap((m) => m.local.filter((target) => !FOUNDATION.includes(target)).map((target) => `${m.name} -> ${target}`));
    expect(climbing).toEqual([]);
  });

  it('keeps engine/, providers/ and handlers/ off the database drivers and express', () => {
    const drivers = importsOf(['engine', 'providers', 'handlers']).filter((m) => m.packages.some((p) => ['knex', 'pg', 'better-sqlite3', 'express'].includes(p)));
    expect(drivers.map((m) => m.name)).toEqual([]);
  });

  it('lets only src/db/ ask which database it runs on', () => {
    const asking = modules.filter((m) => room(m.name) !== 'db' && /\bisPostgres\s*\(/.test(m.text)).map((m) => m.name);
    expect(asking).toEqual([]);
  });

  it('lets only app.ts, http/ and dashboard/ use express', () => {
    const users = modules.filter((m) => m.packages.includes('express') && !['app.ts', 'http', 'dashboard'].includes(room(m.name)));
    expect(users.map((m) => m.name)).toEqual([]);
  });

  it('keeps client/ a package of its own: it imports no other room, none imports it, and of packages only openapi-fetch', () => {
    expect(offending(['client'], (target) => room(target) !== 'client')).toEqual([]);
    const others = modules.filter((m) => room(m.name) !== 'client');
    expect(offending(others.map((m) => room(m.name)), (target) => room(target) === 'client')).toEqual([]);
    expect([...new Set(importsOf(['client']).flatMap((m) => m.packages))]).toEqual(['openapi-fetch']);
  });

  it('has no import cycle, type-only imports included', () => {
    const edges = new Map(modules.map((m) => [m.name, m.local]));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (name: string, trail: string[]) => {
      if (state.get(name) === 'done') return;
      if (state.get(name) === 'open') {
        cycles.push([...trail.slice(trail.indexOf(name)), name].join(' -> '));
        return;
      }
      state.set(name, 'open');
      for (const next of edges.get(name) ?? []) visit(next, [...trail, name]);
      state.set(name, 'done');
    };
    for (const name of edges.keys()) visit(name, []);
    expect(cycles).toEqual([]);
  });
});
