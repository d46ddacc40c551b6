// A static file server for the browser tests that sends the headers `trunk serve` sends (from
// Trunk.toml's [serve] headers), so the tests see what users of scripts/serve.sh get: above all
// the Content-Security-Policy on every response, the Web Worker's script included (a <meta> CSP
// covers the page only). Usage: node serve.mjs PORT DIST_DIR
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const [port, distArg] = process.argv.slice(2);
const dist = resolve(distArg);
const here = fileURLToPath(new URL('.', import.meta.url));

// The headers table of Trunk.toml: headers = { "Name" = "value", ... } on one line.
const trunk = readFileSync(join(here, '../../Trunk.toml'), 'utf8');
const line = trunk.split('\n').find((l) => /^headers\s*=\s*\{/.test(l));
if (!line) throw new Error('Trunk.toml has no [serve] headers line');
const headers = Object.fromEntries(
  [...line.matchAll(/"([^"]+)"\s*=\s*"([^"]*)"/g)].map((m) => [m[1], m[2]]),
);

const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.csv': 'text/csv; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

createServer(async (req, res) => {
  const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  let file = normalize(join(dist, path));
  if (file !== dist && !file.startsWith(dist + sep)) {
    res.writeHead(403, headers).end();
    return;
  }
  try {
    if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
    const body = await readFile(file);
    res.writeHead(200, {
      ...headers,
      'Content-Type': types[extname(file)] || 'application/octet-stream',
    });
    res.end(body);
  } catch {
    res.writeHead(404, headers).end();
  }
}).listen(Number(port), '127.0.0.1');
