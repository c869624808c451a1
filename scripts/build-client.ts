// npm run build:client [-- <outdir>]: herald/client as a package of its own (default dist/client):
//   index.js, inbox.js, …  ES modules, with their .d.ts, compiled by tsc (src/client/tsconfig.json)
//   v1.d.ts                the contract's generated types, which the declarations import
//   browser/herald-client.js  one ES module with openapi-fetch inside, for a page without a bundler,
//                             and its declarations (the package's own: it exports what index.js does)
//   package.json, README.md   so the folder can be `npm install`ed or `npm pack`ed as it is
// The folder is built whole in a temporary folder beside it and then put in place, so a reader
// never sees half a build.
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = path.join(ROOT, 'src', 'client');
const GENERATED = path.join(ROOT, 'generated', 'v1.d.ts');
export const CLIENT_DIR = path.join(ROOT, 'dist', 'client');
/** Where the single-file browser module lands inside the package, and its declarations. */
export const BROWSER_BUNDLE = path.join('browser', 'herald-client.js');
const BROWSER_TYPES = path.join('browser', 'herald-client.d.ts');

const rootPackage = () => JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; license: string; dependencies: Record<string, string> };

export async function buildClient(outdir = CLIENT_DIR): Promise<void> {
  const staging = `${outdir}.${process.pid}.${Date.now()}.tmp`;
  fs.rmSync(staging, { recursive: true, force: true });
  try {
    const tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
    await promisify(execFile)(tsc, ['-p', path.join(SOURCE, 'tsconfig.json'), '--outDir', staging], { cwd: ROOT }).catch((err: { stdout?: string }) => {
      throw new Error(`tsc could not build the client:\n${err.stdout ?? String(err)}`);
    });
    // The sources import the contract's types from generated/; inside the package they sit beside
    // the declarations, so each declaration's import is pointed at the copy.
    fs.copyFileSync(GENERATED, path.join(staging, 'v1.d.ts'));
    for (const file of fs.readdirSync(staging).filter((name) => name.endsWith('.d.ts') && name !== 'v1.d.ts')) {
      const full = path.join(staging, file);
      fs.writeFileSync(full, fs.readFileSync(full, 'utf8').replaceAll("'../../generated/v1.js'", "'./v1.js'"));
    }
    await build({
      entryPoints: [path.join(staging, 'index.js')],
      outfile: path.join(staging, BROWSER_BUNDLE),
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      minify: true,
      legalComments: 'inline',
      logLevel: 'warning',
    });
    fs.writeFileSync(path.join(staging, BROWSER_TYPES), "export * from '../index.js';\n");
    const { version, license, dependencies } = rootPackage();
    const manifest = {
      name: '@herald/client',
      version,
      description: "Typed clients for Herald's API and a subscriber's inbox, from Herald's OpenAPI contract",
      license,
      type: 'module',
      exports: {
        '.': { types: './index.d.ts', default: './index.js' },
        './browser': { types: `./${BROWSER_TYPES}`, default: `./${BROWSER_BUNDLE}` },
      },
      types: './index.d.ts',
      sideEffects: false,
      dependencies: { 'openapi-fetch': dependencies['openapi-fetch'] },
    };
    fs.writeFileSync(path.join(staging, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    fs.copyFileSync(path.join(SOURCE, 'README.md'), path.join(staging, 'README.md'));
    fs.rmSync(outdir, { recursive: true, force: true });
    fs.mkdirSync(path.dirname(outdir), { recursive: true });
    fs.renameSync(staging, outdir);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** The newest change to anything the package is built from. */
export function clientSourcesChangedAt(): number {
  const sources = [...fs.readdirSync(SOURCE).map((name) => path.join(SOURCE, name)), GENERATED, fileURLToPath(import.meta.url)];
  return Math.max(...sources.map((file) => fs.statSync(file).mtimeMs));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildClient(process.argv[2] ? path.resolve(process.argv[2]) : undefined);
}
