// Smoke test of the page and its worker: the page loads without console errors, the worker answers
// a ping naming its backend (WebGPU when Chromium grants an adapter), and a CSV read through the
// data layer shows its summary or its validation error. Screenshots go to screenshots/ (git-ignored).
import { test, expect } from '@playwright/test';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const shots = path.resolve(here, '../../screenshots');
fs.mkdirSync(shots, { recursive: true });

function chainCsv(rows = 50) {
  let text = 'cause,mediator,effect\n';
  for (let n = 0; n < rows; n++) {
    const x = Math.sin(n * 0.7) * 2;
    const m = Math.tanh(x) + 0.1 * Math.cos(n * 1.3);
    const y = m * m + 0.05 * Math.sin(n * 2.1);
    text += `${x.toFixed(6)},${m.toFixed(6)},${y.toFixed(6)}\n`;
  }
  return text;
}

// Collects console errors, page errors and every request the page makes.
function watch(page) {
  const seen = { errors: [], requests: [] };
  page.on('console', (msg) => {
    if (msg.type() === 'error') seen.errors.push(msg.text());
  });
  page.on('pageerror', (err) => seen.errors.push(String(err)));
  page.on('request', (req) => seen.requests.push(req.url()));
  return seen;
}

test('page loads; the badge names WebGPU and its adapter when Chromium offers one, the CPU otherwise', async ({ page, baseURL }, info) => {
  const seen = watch(page);
  await page.goto('/');
  // The cores the page sizes its compute pool by, in the log: the suite's times on another
  // machine are read against it.
  console.log(`navigator.hardwareConcurrency = ${await page.evaluate(() => navigator.hardwareConcurrency)}`);
  const badge = page.getByTestId('backend-badge');
  const gpu = info.project.metadata.adapter === 'available';
  await expect(badge).toHaveAttribute('data-backend', gpu ? 'webgpu' : 'cpu');
  await expect(badge).toHaveAttribute('data-gpu-adapter', info.project.metadata.adapter);
  await expect(badge).toHaveAttribute('data-switched', 'no');
  if (gpu) {
    await expect(badge).toContainText('WebGPU');
    await expect(badge).toHaveAttribute('title', /uncollapsed bound/);
  } else {
    await expect(badge).toContainText('CPU');
    await expect(badge).not.toContainText('WebGPU');
  }
  await expect(page.getByTestId('drop-zone')).toBeVisible();
  await page.screenshot({ path: path.join(shots, `smoke-loaded-${info.project.name}.png`), fullPage: true });
  expect(seen.errors).toEqual([]);
  // Only the app's own assets are requested.
  const foreign = seen.requests.filter((u) => !u.startsWith(baseURL) && !u.startsWith('data:'));
  expect(foreign).toEqual([]);
});

test('the worker runs under the same Content-Security-Policy as the page, and test hooks are opt-in', async ({ page, context }) => {
  // Responses of the page's context include those of its dedicated worker's scripts.
  const policies = {};
  context.on('response', (res) => {
    const name = new URL(res.url()).pathname.split('/').pop();
    policies[name] = res.headers()['content-security-policy'];
  });
  await page.goto('/');
  await expect(page.getByTestId('backend-badge')).not.toHaveAttribute('data-backend', 'probing');
  const meta = await page.locator('meta[http-equiv="Content-Security-Policy"]').getAttribute('content');
  expect(meta).toContain("connect-src 'self'");
  // '' is the page itself ('/'); the other three are the worker's loader, glue and module.
  for (const name of ['', 'worker_loader.js', 'worker.js', 'worker_bg.wasm']) {
    expect(policies[name], `the served policy of '${name}'`).toBe(meta);
  }
  // Without #test-hooks the fault-injection buttons are not on the page.
  await expect(page.getByTestId('crash-worker')).toHaveCount(0);
});

test('a CSV chosen with the file picker shows its summary', async ({ page }, info) => {
  const seen = watch(page);
  await page.goto('/');
  await expect(page.getByTestId('backend-badge')).not.toHaveAttribute('data-backend', 'probing');
  await page.getByTestId('file-input').setInputFiles({
    name: 'chain.csv',
    mimeType: 'text/csv',
    buffer: Buffer.from(chainCsv()),
  });
  const summary = page.getByTestId('data-summary');
  await expect(summary).toBeVisible();
  await expect(page.getByTestId('rows')).toHaveText('50');
  await expect(page.getByTestId('columns')).toHaveText('3');
  await expect(summary).toContainText('mediator');
  await expect(page.getByTestId('error')).toHaveCount(0);
  await page.screenshot({ path: path.join(shots, `smoke-summary-${info.project.name}.png`), fullPage: true });
  expect(seen.errors).toEqual([]);
});

test('a CSV dropped on the drop zone is read too', async ({ page }) => {
  await page.goto('/');
  await expect(page.getByTestId('backend-badge')).not.toHaveAttribute('data-backend', 'probing');
  const text = chainCsv(30);
  const dataTransfer = await page.evaluateHandle((csv) => {
    const dt = new DataTransfer();
    dt.items.add(new File([csv], 'dropped.csv', { type: 'text/csv' }));
    return dt;
  }, text);
  await page.getByTestId('drop-zone').dispatchEvent('drop', { dataTransfer });
  await expect(page.getByTestId('rows')).toHaveText('30');
  await expect(page.getByTestId('data-summary')).toContainText('dropped.csv');
});

test('a malformed CSV shows an error naming the line and the column', async ({ page }, info) => {
  const seen = watch(page);
  await page.goto('/');
  await expect(page.getByTestId('backend-badge')).not.toHaveAttribute('data-backend', 'probing');
  const bad = chainCsv(20).split('\n');
  bad[5] = bad[5].replace(/^[^,]+,/, 'oops,');
  await page.getByTestId('file-input').setInputFiles({
    name: 'bad.csv',
    mimeType: 'text/csv',
    buffer: Buffer.from(bad.join('\n')),
  });
  const error = page.getByTestId('error');
  await expect(error).toBeVisible();
  await expect(error).toContainText('line 6');
  await expect(error).toContainText("column 'cause'");
  await expect(error).toContainText("'oops' is not a number");
  await expect(page.getByTestId('data-summary')).toHaveCount(0);
  await page.screenshot({ path: path.join(shots, `smoke-error-${info.project.name}.png`), fullPage: true });
  // A refused file is an expected outcome, not a console error.
  expect(seen.errors).toEqual([]);
});
