// npm run build [-- <outdir>]: compiles src/ to plain JavaScript, one file per module (default
// dist/src), which `npm start` runs on node alone: no TypeScript loader in production, which
// would add a thread and about 30 MB to every process. The folder is emptied first, so a module
// deleted from src/ does not live on in the build. It also builds herald/client into dist/client
// (scripts/build-client.ts): the package frontend teams install, whose browser module the
// server's example inbox page loads.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { buildClient } from './build-client.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export async function buildServer(outdir = path.join(ROOT, 'dist', 'src')): Promise<void> {
  fs.rmSync(outdir, { recursive: true, force: true });
  await build({ entryPoints: [path.join(ROOT, 'src/**/*.ts')], outdir, platform: 'node', format: 'esm', logLevel: 'warning' });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await Promise.all([buildServer(process.argv[2] ? path.resolve(process.argv[2]) : undefined), buildClient()]);
}
