// The house's rules (ARCHITECTURE.md), read from the imports of src/: each room imports only the
// rooms below it, nothing imports in a circle, and the database's dialects stay under src/db/.
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

const IMPORT = /^\s*(?:import|export)\s(?:type\s)?[^'"]*?from\s*'([^']+)'|^\s*import\s*'([^']+)'|import\(\s*'([^']+)'\s*\)/gm;

interface Module {
  /** Path under src/, e.g. `db/repos/jobs.ts`. */
  name: string;
  text: string;
  /** Modules of src/ it imports (paths under src/), and the packages it imports by name. */
  local: string[];
  packages: string[];
}

function readModules(): Module[] {
  return filesUnder(SRC).map((file) => {
    const text = fs.readFileSync(file, 'utf8');
    const local: string[] = [];
    const packages: string[] = [];
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2] ?? match[3];
      if (spec.startsWith('.')) {
        const target = path.relative(SRC, path.resolve(path.dirname(file), spec)).replace(/\.js$/, '.ts');
        if (!target.startsWith('..')) local.push(target);
      } else {
        packages.push(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    }
    return { name: path.relative(SRC, file), text, local, packages };
  });
}

const modules = readModules();
const room = (name: string) => (name.includes('/') ? name.split('/')[0] : name);
/** The files at the top of src/ that every room may use: they import no room themselves. */
const FOUNDATION = ['contract.ts', 'errors.ts', 'json-schema.ts', 'ids.ts', 'clock.ts', 'config.ts', 'logger.ts', 'crypto.ts', 'api-keys.ts', 'paths.ts', 'work-signal.ts', 'metrics.ts', 'outbound-guard.ts', 'bounded-map.ts'];

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
  });

  it('keeps the foundation free of every room', () => {
    const foundation = modules.filter((m) => FOUNDATION.includes(m.name));
    expect(foundation.length).toBe(FOUNDATION.filter((name) => fs.existsSync(path.join(SRC, name))).length);
    const climbing = foundation.flatMap((m) => m.local.filter((target) => !FOUNDATION.includes(target)).map((target) => `${m.name} -> ${target}`));
    expect(climbing).toEqual([]);
  });

  it('keeps providers/ on the foundation alone', () => {
    expect(offending(['providers'], (target) => room(target) !== 'providers' && !FOUNDATION.includes(target))).toEqual([]);
  });

  it('keeps db/ below http/, engine/, handlers/, accounts/ and dashboard/ (of providers/, it reads the catalogue only)', () => {
    expect(offending(['db'], (target) => ['http', 'engine', 'handlers', 'accounts', 'dashboard'].includes(room(target)))).toEqual([]);
    expect(offending(['db'], (target) => room(target) === 'providers' && target !== 'providers/catalogue.ts')).toEqual([]);
  });

  it('keeps engine/ off http/, handlers/ and dashboard/, and off the database drivers', () => {
    expect(offending(['engine', 'providers'], (target) => ['http', 'handlers', 'dashboard', 'app.ts', 'main.ts'].includes(room(target)))).toEqual([]);
    const drivers = importsOf(['engine', 'providers', 'handlers']).filter((m) => m.packages.some((p) => ['knex', 'pg', 'better-sqlite3', 'express'].includes(p)));
    expect(drivers.map((m) => m.name)).toEqual([]);
  });

  it('keeps handlers/ off http/ internals other than its handler types', () => {
    expect(offending(['handlers'], (target) => room(target) === 'http' && target !== 'http/types.ts')).toEqual([]);
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
