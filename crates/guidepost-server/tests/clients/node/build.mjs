// Bundles widget/index.jsx into widget/dist/ with esbuild (no network needed).
import * as esbuild from 'esbuild';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const started = Date.now();
const result = await esbuild.build({
  entryPoints: [path.join(here, 'widget', 'index.jsx')],
  outdir: path.join(here, 'widget', 'dist'),
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  jsx: 'automatic',
  minify: true,
  sourcemap: true,
  define: { 'process.env.NODE_ENV': '"production"' },
  loader: { '.png': 'file', '.svg': 'file' },
  logLevel: 'warning',
  metafile: true,
});
const outputs = Object.entries(result.metafile.outputs)
  .filter(([f]) => !f.endsWith('.map'))
  .map(([f, o]) => `${path.relative(here, f)} (${o.bytes} bytes)`);
console.log(`built ${outputs.join(', ')} in ${Date.now() - started} ms`);
