// Shared pieces of the browser tests: data sets, screenshots, and watchers for console errors,
// network requests and main-thread long tasks.
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from '@playwright/test';

const here = path.dirname(fileURLToPath(import.meta.url));
export const shots = path.resolve(here, '../../screenshots');
fs.mkdirSync(shots, { recursive: true });

/** A 3-variable chain cause → mediator → effect with nonlinear mechanisms and noise. */
export function chainCsv(rows = 200, names = ['cause', 'mediator', 'effect']) {
  let text = `${names.join(',')}\n`;
  let seed = 7;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648 - 0.5;
  };
  for (let n = 0; n < rows; n++) {
    const x = 2 * rand() + Math.sin(n * 0.37);
    const m = Math.tanh(1.5 * x) + 0.3 * rand();
    const y = m * m * m + 0.3 * rand();
    text += `${x.toFixed(6)},${m.toFixed(6)},${y.toFixed(6)}\n`;
  }
  return text;
}

/** Collects console errors, page errors, dialogs and every request the page makes. */
export function watch(page) {
  const seen = { errors: [], requests: [], dialogs: [] };
  page.on('console', (msg) => {
    if (msg.type() === 'error') seen.errors.push(msg.text());
  });
  page.on('pageerror', (err) => seen.errors.push(String(err)));
  page.on('request', (req) => seen.requests.push(req.url()));
  page.on('dialog', async (dialog) => {
    seen.dialogs.push(dialog.message());
    await dialog.dismiss();
  });
  return seen;
}

/** Requests to anything but the app's own origin (data: and blob: URLs are local). */
export function foreignRequests(seen, baseURL) {
  return seen.requests.filter(
    (u) => !u.startsWith(baseURL) && !u.startsWith('data:') && !u.startsWith('blob:'),
  );
}

/** Records main-thread long tasks (PerformanceObserver 'longtask') from the first script on. */
export async function recordLongTasks(page) {
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered: true });
  });
}

/** Long tasks since the last call (durations in ms). */
export async function takeLongTasks(page) {
  return page.evaluate(() => {
    const t = window.__longTasks.slice();
    window.__longTasks.length = 0;
    return t;
  });
}

export async function shot(page, name, info) {
  await page.screenshot({ path: path.join(shots, `${name}-${info.project.name}.png`), fullPage: true });
}

/**
 * Opens the page and waits for the worker to answer. The page's default method is auto (the
 * exact search on few variables); most tests here exercise the continuous search's live views,
 * restarts and phases, so `method` is selected unless it is null (the page's default kept).
 */
export async function open(page, suffix = '', { method = 'cgp' } = {}) {
  await page.goto(`/${suffix}`);
  await expect(page.getByTestId('backend-badge')).not.toHaveAttribute('data-backend', 'probing');
  if (method) await page.getByTestId('method-select').selectOption(method);
}

/** Chooses a CSV file with the file picker. */
export async function pick(page, name, text) {
  await page.getByTestId('file-input').setInputFiles({
    name,
    mimeType: 'text/csv',
    buffer: Buffer.from(text),
  });
}

/** Drops a CSV file on the drop zone. */
export async function drop(page, name, text) {
  const dataTransfer = await page.evaluateHandle(
    ([csv, fileName]) => {
      const dt = new DataTransfer();
      dt.items.add(new File([csv], fileName, { type: 'text/csv' }));
      return dt;
    },
    [text, name],
  );
  await page.getByTestId('drop-zone').dispatchEvent('drop', { dataTransfer });
}

/** Sets settings fields by key (the inputs' data-field). */
export async function setFields(page, values) {
  const advanced = page.locator('details.advanced');
  if (!(await advanced.evaluate((d) => d.open))) await advanced.locator('summary').click();
  for (const [key, value] of Object.entries(values)) {
    await page.locator(`input[data-field="${key}"]`).fill(String(value));
  }
}

/** Settings small enough for a 3-variable run to end in seconds in a browser. */
export const QUICK = {
  restarts: 1,
  max_rows: 120,
  inducing_points: 10,
  warmup_min: 30,
  warmup_max: 120,
  acyclic_max: 300,
  cooldown_min: 20,
  cooldown_max: 80,
  start_iterations: 40,
};

/** Settings that keep a run going for a while (for pause, stop and the snapshot rate). */
export const LONG = {
  restarts: 2,
  max_rows: 200,
  inducing_points: 20,
  warmup_min: 3000,
  warmup_max: 3000,
  acyclic_max: 3000,
  cooldown_min: 100,
  cooldown_max: 100,
  start_iterations: 40,
};
