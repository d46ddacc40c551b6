// End-to-end tests of the app in Debian's headless Chromium: a run from a dropped CSV to the
// result, pause/resume/stop, exports, ground truth, a 50 MB file, a dying worker, invalid settings,
// and HTML in column names. Screenshots of each state go to screenshots/ (git-ignored).
import { test, expect } from '@playwright/test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  chainCsv, watch, foreignRequests, recordLongTasks, takeLongTasks, shot, open, pick, drop,
  setFields, QUICK, LONG,
} from './helpers.mjs';

/** Parses Graphviz DOT as Occam writes it: quoted node lines and `"a" -> "b";` edge lines. */
function parseDot(text) {
  const lines = text.trim().split('\n').map((l) => l.trim());
  expect(lines[0]).toMatch(/^digraph\s+\w*\s*\{$/);
  expect(lines[lines.length - 1]).toBe('}');
  const unquote = (s) => JSON.parse(s);
  const nodes = [];
  const edges = [];
  for (const line of lines.slice(1, -1)) {
    if (line === '' || line.startsWith('//')) continue;
    let m = line.match(/^("(?:[^"\\]|\\.)*")\s*->\s*("(?:[^"\\]|\\.)*")\s*;$/);
    if (m) {
      edges.push([unquote(m[1]), unquote(m[2])]);
      continue;
    }
    m = line.match(/^("(?:[^"\\]|\\.)*")\s*;$/);
    if (m) {
      nodes.push(unquote(m[1]));
      continue;
    }
    // Graph attributes such as rankdir=TB; are allowed.
    expect(line).toMatch(/^[a-z]+\s*=\s*[^;]+;$|^(node|edge|graph)\s*\[.*\];?$/);
  }
  return { nodes, edges };
}

async function runToEnd(page, timeout = 120_000) {
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('status')).toHaveText('done', { timeout });
}

test('a dropped chain runs to completion with live views, 3 nodes, a responsive page and no foreign request', async ({ page, baseURL }, info) => {
  test.setTimeout(180_000);
  const seen = watch(page);
  await recordLongTasks(page);
  await open(page);
  await drop(page, 'chain.csv', chainCsv(200));
  await expect(page.getByTestId('rows')).toHaveText('200');
  await expect(page.getByTestId('status')).toHaveText('ready');
  await shot(page, 'app-1-loaded', info);
  await setFields(page, QUICK);
  await takeLongTasks(page);
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('phase')).toBeVisible();
  await expect(page.getByTestId('status')).toHaveText(/running|done/);
  await shot(page, 'app-2-running', info);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 150_000 });
  const longTasks = await takeLongTasks(page);
  expect(Math.max(0, ...longTasks), `long tasks: ${longTasks}`).toBeLessThanOrEqual(200);
  await expect(page.getByTestId('results')).toBeVisible();
  const dag = page.getByTestId('dag-svg');
  await expect(dag.locator('[data-node]')).toHaveCount(3);
  const labels = await dag.locator('[data-node] text').evaluateAll((ts) => ts.map((t) => t.textContent).sort());
  expect(labels).toEqual(['cause', 'effect', 'mediator']);
  await expect(page.getByTestId('phase')).toHaveAttribute('data-phase', 'done');
  await expect(page.getByTestId('progress')).toHaveAttribute('data-fraction', '1.000');
  await expect(page.getByTestId('restarts').locator('tbody tr')).toHaveCount(1);
  // The canvases were drawn (not blank).
  for (const id of ['adjacency-canvas', 'loss-chart']) {
    const inked = await page.getByTestId(id).evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let k = 0; k < d.length; k += 4) if (d[k + 3] > 0 && (d[k] < 200 || d[k + 1] < 200)) n++;
      return n;
    });
    expect(inked, id).toBeGreaterThan(500);
  }
  await shot(page, 'app-3-done', info);
  expect(seen.errors).toEqual([]);
  expect(foreignRequests(seen, baseURL)).toEqual([]);
});

test('pause and resume work, snapshots arrive at least 4 times a second, stop keeps the best graph so far', async ({ page }, info) => {
  test.setTimeout(120_000);
  const seen = watch(page);
  await recordLongTasks(page);
  await open(page);
  await pick(page, 'chain.csv', chainCsv(300));
  await expect(page.getByTestId('status')).toHaveText('ready');
  await setFields(page, LONG);
  // The page's start (compiling and mounting the app) is one long task of 154–209 ms measured
  // on 2 cores: bounded loosely here, while the run's own main-thread work is held to 200 ms.
  const startup = await takeLongTasks(page);
  expect(Math.max(0, ...startup), `start-up long tasks: ${startup}`).toBeLessThanOrEqual(500);
  await page.getByTestId('run-button').click();
    const status = page.getByTestId('status');
  const count = async () => Number(await status.getAttribute('data-snapshots'));
  // The rate from the start, the variables' starting fits included.
  const t0 = Date.now();
  const n0 = await count();
  await expect(status).toHaveText('running');
  // No other data or record may be loaded under a running run.
  await expect(page.getByTestId('record-input')).toBeDisabled();
  await expect(page.getByTestId('file-input')).toBeDisabled();
  await page.waitForTimeout(3000);
  const rate = ((await count()) - n0) / ((Date.now() - t0) / 1000);
  expect(rate, `snapshots per second: ${rate}`).toBeGreaterThanOrEqual(4);

  await page.getByTestId('pause-button').click();
  await expect(status).toHaveText('paused');
  await expect(page.getByTestId('pause-button')).toHaveText('Resume');
  const phaseText = async () => page.getByTestId('phase').textContent();
  const held = await phaseText();
  await page.waitForTimeout(1500);
  expect(await phaseText(), 'no progress while paused').toBe(held);
  await shot(page, 'app-4-paused', info);
  await page.getByTestId('pause-button').click();
  await expect(status).toHaveText('running');
  await expect.poll(phaseText, { timeout: 10_000 }).not.toBe(held);

  await page.getByTestId('stop-button').click();
  await expect(status).toHaveText('stopped');
  await expect(page.getByTestId('results')).toBeVisible();
    await expect(page.getByTestId('result-summary')).toContainText('stopped early');
  await expect(page.getByTestId('phase')).toContainText('best graph so far');
  // The bar stays where the run stopped (issue 15), not full.
  await expect(page.getByTestId('time-left')).toContainText(/^stopped at \d+ % · after /);
  await expect(page.getByTestId('progress')).toHaveAttribute('data-state', 'stopped');
  expect(Number(await page.getByTestId('progress').getAttribute('data-fraction'))).toBeLessThan(1);
  await expect(page.getByTestId('dag-svg').locator('[data-node]')).toHaveCount(3);
  await expect(page.getByTestId('run-button')).toBeEnabled();
  await shot(page, 'app-5-stopped', info);
  const longTasks = await takeLongTasks(page);
  expect(Math.max(0, ...longTasks), `long tasks: ${longTasks}`).toBeLessThanOrEqual(200);
  expect(seen.errors).toEqual([]);
});

test('exports download and parse; a saved run record loads back with the same result; the truth gives metrics', async ({ page }, info) => {
  test.setTimeout(180_000);
  const seen = watch(page);
  await open(page);
  await pick(page, 'chain.csv', chainCsv(200));
  await setFields(page, QUICK);
  await runToEnd(page);

  const save = async (testid) => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId(testid).click()]);
    const file = path.join(os.tmpdir(), `occam-${Date.now()}-${download.suggestedFilename()}`);
    await download.saveAs(file);
    return { name: download.suggestedFilename(), text: fs.readFileSync(file, 'utf8'), file };
  };
  const record = await save('export-json');
  expect(record.name).toBe('chain-result.json');
  const result = JSON.parse(record.text);
  expect(result.names).toEqual(['cause', 'mediator', 'effect']);
  expect(result.status).toBe('done');

  const dot = await save('export-dot');
  expect(dot.name).toBe('chain-graph.dot');
  const parsed = parseDot(dot.text);
  expect(parsed.nodes).toEqual(result.names);
  const expectedEdges = result.edges.map(([i, j]) => [result.names[i], result.names[j]]);
  expect(parsed.edges.sort()).toEqual(expectedEdges.sort());

  const csv = await save('export-csv');
  expect(csv.text).toContain('cause');
  for (const id of ['export-edges', 'export-dagitty', 'export-tetrad', 'export-svg']) {
    const f = await save(id);
    expect(f.text.length, id).toBeGreaterThan(10);
  }
  const svg = await save('export-svg');
  expect(svg.text).toContain('<svg');
  expect(svg.text).toContain('>mediator</text>');
  const png = await save('export-png');
  expect(fs.readFileSync(png.file).subarray(1, 4).toString()).toBe('PNG');

  // The truth: the chain cause → mediator → effect, as an edge list.
  await page.getByTestId('truth-input').setInputFiles({
    name: 'truth.csv',
    mimeType: 'text/csv',
    buffer: Buffer.from('from,to\ncause,mediator\nmediator,effect\n'),
  });
  const metrics = page.getByTestId('metrics');
  await expect(metrics).toBeVisible();
  await expect(metrics).toContainText('SHD (reversed edge counts 2)');
  await expect(metrics).toContainText('SHD (reversed edge counts 1)');
  await expect(metrics).toContainText('SID');
  await expect(metrics).toContainText('F1');
  const kinds = await page.getByTestId('dag-svg').locator('path[data-kind]').evaluateAll((ps) => ps.map((p) => p.dataset.kind));
  expect(kinds.length).toBeGreaterThanOrEqual(2);
  for (const k of kinds) expect(['correct', 'reversed', 'missing', 'extra']).toContain(k);
    await shot(page, 'app-6-truth', info);
  const metricValues = async () => page.locator('[data-metric]').evaluateAll((cells) => cells.map((c) => `${c.dataset.metric}=${c.textContent}`));
  const metricsBefore = await metricValues();
  expect(metricsBefore.length).toBe(6);

  // A bad truth file is explained.
  await page.getByTestId('truth-input').setInputFiles({
    name: 'wrong.csv', mimeType: 'text/csv', buffer: Buffer.from('from,to\ncause,nowhere\n'),
  });
  await expect(page.getByTestId('truth-error')).toContainText('nowhere');
  // A file of delimiters only used to kill the page with the result on it (issue 12).
  await page.getByTestId('truth-input').setInputFiles({
    name: 'comma.csv', mimeType: 'text/csv', buffer: Buffer.from(','),
  });
  await expect(page.getByTestId('truth-error')).toContainText('no matrix rows');
  await expect(page.getByTestId('results')).toBeVisible();
  // A labelled truth in another name order is matched by name and scores as the edge list did.
  await page.getByTestId('truth-input').setInputFiles({
    name: 'labelled.csv', mimeType: 'text/csv',
    buffer: Buffer.from(',effect,cause,mediator\neffect,0,0,0\ncause,0,0,1\nmediator,1,0,0\n'),
  });
  await expect(page.getByTestId('metrics')).toBeVisible();
  expect(await metricValues()).toEqual(metricsBefore);

  // Load the record back in a fresh page: the same graph and restarts.
  await page.reload();
  await expect(page.getByTestId('backend-badge')).not.toHaveAttribute('data-backend', 'probing');
  await page.getByTestId('record-input').setInputFiles(record.file);
  await expect(page.getByTestId('results')).toBeVisible();
  await expect(page.getByTestId('results')).toContainText('chain-result.json');
  const edgesShown = await page.getByTestId('dag-svg').locator('path[data-edge]').evaluateAll((ps) => ps.map((p) => p.dataset.edge).sort());
  expect(edgesShown).toEqual(result.edges.map(([i, j]) => `${i}->${j}`).sort());
    await expect(page.getByTestId('restarts').locator('tbody tr')).toHaveCount(result.restarts.length);
  // The same truth gives the same metrics against the reloaded result.
  await page.getByTestId('truth-input').setInputFiles({
    name: 'truth.csv',
    mimeType: 'text/csv',
    buffer: Buffer.from('from,to\ncause,mediator\nmediator,effect\n'),
  });
  await expect(page.getByTestId('metrics')).toBeVisible();
  expect(await metricValues()).toEqual(metricsBefore);
  await shot(page, 'app-7-record', info);
  expect(seen.errors).toEqual([]);
});

test('column names with HTML stay inert text everywhere', async ({ page }, info) => {
  test.setTimeout(180_000);
  const seen = watch(page);
  await open(page);
  const evil = '<img src=x onerror=alert(1)>';
  // Quoted in the CSV (the name has no comma, but quoting must not matter either).
  await pick(page, 'evil.csv', chainCsv(150, [`"${evil}"`, 'b<b>old</b>', 'c']));
  await expect(page.getByTestId('data-summary')).toContainText(evil);
  await setFields(page, QUICK);
  await runToEnd(page);
  await expect(page.getByTestId('dag-svg')).toContainText(evil);
  expect(await page.locator('img').count()).toBe(0);
  expect(await page.locator('b').count()).toBe(0);
  expect(seen.dialogs).toEqual([]);
  // The only request for "x" would come from the injected image.
  expect(seen.requests.filter((u) => u.endsWith('/x'))).toEqual([]);
  await shot(page, 'app-8-html-names', info);
});

test('a 50 MB CSV loads in the worker with a progress indicator and the page stays responsive', async ({ page }, info) => {
  test.setTimeout(180_000);
  await recordLongTasks(page);
  await open(page);
  const file = path.join(os.tmpdir(), 'occam-50mb.csv');
  if (!fs.existsSync(file) || fs.statSync(file).size < 50e6) {
    const cols = 8;
    const header = Array.from({ length: cols }, (_, k) => `v${k}`).join(',') + '\n';
    const chunks = [header];
    let size = header.length;
    let n = 0;
    while (size < 50.5e6) {
      let row = '';
      for (let k = 0; k < cols; k++) row += (k ? ',' : '') + (Math.sin(n * (k + 1) * 0.37) * 1000).toFixed(6);
      row += '\n';
      chunks.push(row);
      size += row.length;
      n++;
    }
    fs.writeFileSync(file, chunks.join(''));
  }
    await takeLongTasks(page);
  // Every text the progress indicator shows while the file is read.
  await page.evaluate(() => {
    window.__progressTexts = new Set();
    new MutationObserver(() => {
      const el = document.querySelector('[data-testid=load-progress]');
      if (el) window.__progressTexts.add(el.textContent);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.getByTestId('file-input').setInputFiles(file);
  await expect(page.getByTestId('load-progress')).toBeVisible();
  await shot(page, 'app-9-loading', info);
  await expect(page.getByTestId('data-summary')).toBeVisible({ timeout: 120_000 });
    await expect(page.getByTestId('columns')).toHaveText('8');
  const texts = await page.evaluate(() => [...window.__progressTexts]);
  // The worker reported progress as it went: several distinct byte counts, not one jump.
  expect(texts.filter((t) => /MB of 50\.\d MB/.test(t)).length, texts.join(' | ')).toBeGreaterThanOrEqual(3);
  const longTasks = await takeLongTasks(page);
  expect(Math.max(0, ...longTasks), `long tasks: ${longTasks}`).toBeLessThanOrEqual(200);
  await shot(page, 'app-10-large-loaded', info);
});

test('a worker that dies is reported and can be restarted with the data kept', async ({ page }, info) => {
    await open(page, '#test-hooks');
  await pick(page, 'chain.csv', chainCsv(60));
  await expect(page.getByTestId('rows')).toHaveText('60');
  const cell = page.locator('[data-testid=knowledge-cell][data-from="2"][data-to="0"]');
  await cell.click();
  await expect(cell).toHaveAttribute('data-rule', 'forbidden');
  await page.getByTestId('crash-worker').click();
  const error = page.getByTestId('error');
  await expect(error).toContainText('internal error');
  await expect(page.getByTestId('backend-badge')).toHaveAttribute('data-backend', 'unavailable');
  await expect(page.getByTestId('run-button')).toBeDisabled();
  await shot(page, 'app-11-worker-died', info);
    await page.getByTestId('restart-worker').click();
  await expect(page.getByTestId('error')).toHaveCount(0);
  await expect(page.getByTestId('backend-badge')).toHaveAttribute('data-backend', 'cpu');
  await expect(page.getByTestId('rows')).toHaveText('60');
  await expect(cell).toHaveAttribute('data-rule', 'forbidden');
  // The new worker holds the data again: a run goes through, with the knowledge kept.
  await setFields(page, QUICK);
  await runToEnd(page);
  await expect(page.getByTestId('dag-svg').locator('path[data-edge="2->0"]')).toHaveCount(0);
});

test('a run whose worker dies goes on in a fresh worker from its last save and finishes', async ({ page }, info) => {
  test.setTimeout(180_000);
  await open(page, '#test-hooks');
  await pick(page, 'chain.csv', chainCsv(120));
  await expect(page.getByTestId('rows')).toHaveText('120');
  // Long enough for a save (every 5 s) before the crash on a fast machine too: 8000 warm-up
  // iterations ended in about 6 s on the development VM, before the first save.
  await setFields(page, { ...QUICK, warmup_min: '30000', warmup_max: '30000', acyclic_max: '300' });
  await page.getByTestId('run-button').click();
  const status = page.getByTestId('status');
  // The worker sends the whole run every 5 s.
  await expect(status).toHaveAttribute('data-saved', 'true', { timeout: 30_000 });
  await page.getByTestId('crash-worker').click();
  await expect(page.getByTestId('error')).toContainText('internal error');
  const goOn = page.getByTestId('resume-run');
  await expect(goOn).toBeVisible();
  await shot(page, 'app-11e-run-saved-worker-died', info);
  await goOn.click();
  await expect(page.getByTestId('error')).toHaveCount(0);
  await expect(status).toHaveText('done', { timeout: 150_000 });
  await expect(page.getByTestId('dag-svg').locator('path[data-edge]')).not.toHaveCount(0);
  await expect(page.getByTestId('resume-run')).toHaveCount(0);
});

test('a worker that stops answering is ended by the watchdog and can be restarted', async ({ page }, info) => {
  await open(page, '#test-hooks');
  await pick(page, 'chain.csv', chainCsv(60));
  await expect(page.getByTestId('rows')).toHaveText('60');
  await page.getByTestId('hang-worker').click();
  const error = page.getByTestId('error');
  await expect(error).toContainText('has not answered', { timeout: 15_000 });
  await shot(page, 'app-11b-worker-hung', info);
  await page.getByTestId('restart-worker').click();
  await expect(page.getByTestId('backend-badge')).toHaveAttribute('data-backend', 'cpu');
  await expect(page.getByTestId('rows')).toHaveText('60');
  await expect(page.getByTestId('run-button')).toBeEnabled();
});

test('a worker busy in a long unit of work is not ended by the watchdog, and a pause and a stop land at once', async ({ page }, info) => {
  // On the #test-hooks page the watchdog ends a silent worker after 3 s. Here one variable's
  // starting fit alone (1000 rows, M = 400, up to 1000 L-BFGS iterations) takes far longer than
  // that (about 30 s on a 2-core VM, so the requests below land inside it even on a fast
  // machine); the fit's heartbeat must keep the run alive (issue 12). With one worker the fit
  // runs in a compute worker, so the coordinating worker reads a pause or a stop at once
  // (issue 35, item 6; before, a pause waited for the fit and a stop ended the worker after a
  // 2 s grace).
  await open(page, '#test-hooks');
  await pick(page, 'chain.csv', chainCsv(1000));
  await expect(page.getByTestId('rows')).toHaveText('1000');
  await setFields(page, { max_rows: '1000', inducing_points: '400', start_iterations: '1000', restarts: '1' });
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('status')).toHaveText(/running/);
  await page.waitForTimeout(9000);
  await expect(page.getByTestId('error')).toHaveCount(0);
  await expect(page.getByTestId('status')).toHaveText(/running/);
  const paused = Date.now();
  await page.getByTestId('pause-button').click();
  await expect(page.getByTestId('status')).toHaveText('paused', { timeout: 2000 });
  expect(Date.now() - paused).toBeLessThan(2000);
  await expect(page.getByTestId('pause-button')).toHaveText('Resume');
  await page.getByTestId('pause-button').click();
  await expect(page.getByTestId('status')).toHaveText(/running/);
  const clicked = Date.now();
  await page.getByTestId('stop-button').click();
  await expect(page.getByTestId('status')).toHaveText('stopped', { timeout: 2000 });
  expect(Date.now() - clicked).toBeLessThan(2000);
  await expect(page.getByTestId('error')).toHaveCount(0);
  await expect(page.getByTestId('backend-badge')).toHaveAttribute('data-backend', 'cpu');
  await expect(page.getByTestId('rows')).toHaveText('1000');
  await expect(page.getByTestId('pause-button')).toHaveText('Pause');
  await shot(page, 'app-11d-stopped-while-busy', info);
  // The next run starts as usual.
  await setFields(page, { ...QUICK, max_rows: '100' });
  await runToEnd(page);
});

test('a panic in the page is a visible error, not a blank page', async ({ page }, info) => {
  const seen = watch(page);
  await open(page, '#test-hooks');
  await page.getByTestId('crash-page').click();
  const fatal = page.locator('#fatal');
  await expect(fatal).toBeVisible();
  await expect(fatal).toHaveAttribute('data-testid', 'error');
  await expect(fatal).toContainText('deliberate panic in the page');
  await expect(fatal).toContainText('Reload the page');
  // The page around it is still there.
  await expect(page.getByTestId('drop-zone')).toBeVisible();
  expect(seen.errors.some((e) => e.includes('deliberate panic'))).toBe(true);
  await shot(page, 'app-11c-page-panic', info);
});

test('a file dropped outside the drop zone does not replace the app', async ({ page }) => {
  await open(page);
  const dataTransfer = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['a,b\n1,2\n'], 'stray.csv', { type: 'text/csv' }));
    return dt;
  });
  const prevented = await page.evaluate(() => new Promise((resolve) => {
    window.addEventListener('drop', (e) => setTimeout(() => resolve(e.defaultPrevented)), { once: true });
    document.querySelector('header').dispatchEvent(new DragEvent('drop', { bubbles: true, cancelable: true }));
  }));
  expect(prevented).toBe(true);
  await page.locator('header').dispatchEvent('drop', { dataTransfer });
  await expect(page.getByTestId('drop-zone')).toBeVisible();
  await expect(page.getByTestId('data-summary')).toHaveCount(0);
});

test('invalid settings and contradictory knowledge are explained and block the run', async ({ page }, info) => {
  await open(page);
  await pick(page, 'chain.csv', chainCsv(60));
  await expect(page.getByTestId('run-button')).toBeEnabled();
  await setFields(page, { inducing_points: 'many' });
  await expect(page.getByTestId('settings-error')).toContainText("Inducing points M: 'many' is not a whole number");
  await expect(page.getByTestId('run-button')).toBeDisabled();
  await setFields(page, { inducing_points: '10', warmup_min: '900' });
  await expect(page.getByTestId('settings-error')).toContainText('exceeds its maximum');
  await setFields(page, { warmup_min: '100' });
  await expect(page.getByTestId('settings-error')).toHaveCount(0);
  // A size no machine could hold is refused up front, with the limit named (issue 12).
  await setFields(page, { restarts: '1000000000' });
  await expect(page.getByTestId('settings-error')).toContainText('restarts must be at most 1000');
  await expect(page.getByTestId('run-button')).toBeDisabled();
  await setFields(page, { restarts: '2' });
  await expect(page.getByTestId('settings-error')).toHaveCount(0);
  // cause -> mediator and mediator -> cause both required: a cycle.
  const cell = (from, to) => page.locator(`[data-testid=knowledge-cell][data-from="${from}"][data-to="${to}"]`);
  await cell(0, 1).click();
  await expect(cell(0, 1)).toHaveAttribute('data-rule', 'forbidden');
  await cell(0, 1).click();
  await expect(cell(0, 1)).toHaveAttribute('data-rule', 'required');
  await cell(1, 0).click();
  await cell(1, 0).click();
  await expect(page.getByTestId('knowledge-error')).toContainText('cycle');
  await expect(page.getByTestId('run-button')).toBeDisabled();
  await shot(page, 'app-12-invalid', info);
  await cell(1, 0).click();
  await expect(page.getByTestId('knowledge-error')).toHaveCount(0);
  await page.getByTestId('tier-input').nth(1).fill('0');
  await page.getByTestId('tier-input').nth(0).fill('1');
  await expect(page.getByTestId('knowledge-error')).toContainText('tier');
});

test('data at extreme scales loads like data at ordinary scales', async ({ page }) => {
  // Issue 12: values near 1e160 or 1e-170 used to be zeroed by standardisation.
  const seen = watch(page);
  await open(page);
  const base = chainCsv(60).trim().split('\n');
  for (const factor of [1e160, 1e-170]) {
    const scaled = [base[0], ...base.slice(1).map((line) => line.split(',').map((v) => (Number(v) * factor).toExponential(12)).join(','))].join('\n') + '\n';
    await pick(page, `scaled-${factor}.csv`, scaled);
    await expect(page.getByTestId('data-summary')).toContainText(`scaled-${factor}.csv`);
    await expect(page.getByTestId('rows')).toHaveText('60');
    await expect(page.getByTestId('error')).toHaveCount(0);
  }
  expect(seen.errors).toEqual([]);
});

test('a column that is almost a function of another is reported on load, and the edges that rest on it with the result', async ({ page }, info) => {
  // Issue 35, item 5: F = X1² (no noise) beside a noisy effect of X1 and an unrelated column.
  test.setTimeout(180_000);
  const seen = watch(page);
  await open(page);
  let seed = 11;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648 - 0.5;
  };
  let text = 'X1,X2,X3,F\n';
  for (let n = 0; n < 200; n++) {
    const x1 = 4 * rand();
    const x2 = Math.tanh(x1) + 0.3 * rand();
    const x3 = rand();
    text += `${x1.toFixed(6)},${x2.toFixed(6)},${x3.toFixed(6)},${(x1 * x1).toFixed(6)}\n`;
  }
  await pick(page, 'determined.csv', text);
  await expect(page.getByTestId('problems')).toContainText("column 'F' is almost a function of column 'X1' alone");
  await expect(page.getByTestId('problems')).toContainText('the result names every edge that touches');
  await setFields(page, QUICK);
  await runToEnd(page);
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-json').click()]);
  const result = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
  expect(result.determined).toEqual([{ column: 'F', by: 'X1', residual_fraction: expect.any(Number) }]);
  // The note is shown exactly when the graph has such edges, and names each of them.
  const onF = result.edges_on_determined ?? [];
  await expect(page.getByTestId('determined-note')).toHaveCount(onF.length > 0 ? 1 : 0);
  for (const [a, b] of onF) {
    await expect(page.getByTestId('determined-note')).toContainText(`${result.names[a]} -> ${result.names[b]}`);
  }
  await shot(page, 'app-determined', info);
  expect(seen.errors).toEqual([]);
});

test('the built-in examples load', async ({ page }, info) => {
  const seen = watch(page);
  await open(page);
  await page.getByTestId('example-select').selectOption('sachs');
  await expect(page.getByTestId('rows')).toHaveText('853');
  await expect(page.getByTestId('columns')).toHaveText('11');
  await expect(page.getByTestId('data-summary')).toContainText('pakts473');
  await shot(page, 'app-13-example', info);
  for (const stem of ['chain', 'fork', 'collider', 'altitude_temperature', 'er1_d10', 'syntren01']) {
    await page.getByTestId('example-select').selectOption(stem);
    await expect(page.getByTestId('data-summary')).toContainText(`${stem}.csv`);
  }
  expect(seen.errors).toEqual([]);
});

test('with the page\'s defaults (auto) every built-in example with a known graph comes back right', async ({ page }, info) => {
  test.setTimeout(300_000);
  const seen = watch(page);
  await open(page, '', { method: null });
  await expect(page.getByTestId('method-select')).toHaveValue('auto');
  for (const stem of ['chain', 'fork', 'collider', 'altitude_temperature']) {
    await page.getByTestId('example-select').selectOption(stem);
    await expect(page.getByTestId('data-summary')).toContainText(`${stem}.csv`);
    await page.getByTestId('run-button').click();
    await expect(page.getByTestId('status')).toHaveText('done', { timeout: 120_000 });
    await expect(page.getByTestId('result-method')).toHaveText('exact');
    await expect(page.getByTestId('result-method-reason')).toContainText('auto');
    await expect(page.getByTestId('metrics')).toBeVisible();
    await expect(page.locator('[data-metric="shd"]'), stem).toHaveText('0');
    if (stem === 'collider') await shot(page, 'app-19-collider-default', info);
  }
  expect(seen.errors).toEqual([]);
});

test('each preset fills the form with its own values and notes what it costs', async ({ page }, info) => {
  const seen = watch(page);
  await open(page);
  const value = (key) => page.locator(`[data-field=${key}]`).inputValue();
  await setFields(page, { seed: '7' });
  await page.getByTestId('preset-select').selectOption('thorough');
  await expect(page.getByTestId('preset-note')).toContainText('thorough preset');
  expect(await value('restarts')).toBe('4');
  expect(await value('inducing_per_input')).toBe('1');
  expect(await value('seed')).toBe('7');
  await shot(page, 'app-14-thorough', info);
  await page.getByTestId('preset-select').selectOption('paper');
  await expect(page.getByTestId('preset-note')).toContainText('paper preset');
  expect(await value('max_rows')).toBe('all');
  expect(await value('inducing_points')).toBe('400');
  await page.getByTestId('preset-select').selectOption('interactive');
  await expect(page.getByTestId('preset-note')).toHaveCount(0);
  expect(await value('restarts')).toBe('2');
  expect(await value('max_rows')).toBe('200');
  expect(await value('inducing_per_input')).toBe('0');
  expect(await value('seed')).toBe('7');
  expect(seen.errors).toEqual([]);
});

test('the exact method shows families as they are fitted, then the posterior and the edge probabilities', async ({ page, baseURL }, info) => {
  test.setTimeout(240_000);
  const seen = watch(page);
  await open(page);
  await drop(page, 'chain.csv', chainCsv(150));
  await expect(page.getByTestId('exact-fields')).toBeHidden();
  await page.getByTestId('method-select').selectOption('exact');
  await expect(page.getByTestId('method-note')).toContainText('Exact Bayesian model selection');
  await expect(page.getByTestId('exact-fields')).toBeVisible();
  // `auto` runs the exact search on 3 variables, and says so with its reason.
  await page.getByTestId('method-select').selectOption('auto');
  await expect(page.getByTestId('method-note')).toContainText('Chosen when the run starts');
  await expect(page.getByTestId('exact-fields')).toBeVisible();
  await setFields(page, { max_rows: 150, edge_prior: 'uniform' });
  await page.getByTestId('run-button').click();
  const families = page.getByTestId('families-progress');
  await expect(families).toBeVisible({ timeout: 60_000 });
  expect(Number(await families.getAttribute('data-total'))).toBeGreaterThan(0);
  // No objective is optimised over iterations, so its chart is not shown.
  await expect(page.getByTestId('objective-figure')).toBeHidden();
  await shot(page, 'app-15-exact-running', info);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 200_000 });
  await expect(page.getByTestId('result-method')).toHaveText('exact');
  await expect(page.getByTestId('result-method-reason')).toContainText('auto: 3 variables');
  const posterior = page.getByTestId('posterior');
  await expect(posterior).toBeVisible();
  await expect(posterior).toContainText('Every one of the 25 DAGs was scored');
  const probs = await posterior
    .locator('li.class')
    .evaluateAll((ls) => ls.map((l) => Number(l.dataset.probability)));
  expect(probs.length).toBeGreaterThan(0);
  expect(probs.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1 + 1e-6);
  for (let k = 1; k < probs.length; k++) expect(probs[k]).toBeLessThanOrEqual(probs[k - 1]);
  expect(await posterior.locator('svg').count()).toBeGreaterThan(0);
  const edgeProbabilities = page.getByTestId('edge-probabilities');
  await expect(edgeProbabilities).toBeVisible();
  const inked = await page.getByTestId('edge-probabilities-canvas').evaluate((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let k = 0; k < d.length; k += 4) if (d[k + 3] > 0 && (d[k] < 200 || d[k + 1] < 200)) n++;
    return n;
  });
  expect(inked).toBeGreaterThan(500);
  // An exact run has no restarts to list.
  await expect(page.getByTestId('restarts')).toHaveCount(0);
  await shot(page, 'app-16-exact-done', info);
  expect(seen.errors).toEqual([]);
  expect(foreignRequests(seen, baseURL)).toEqual([]);
});

test('a pool of 3 compute workers gives the edges and scores one worker gives, and the page says how many compute', async ({ page }, info) => {
  test.setTimeout(300_000);
  const seen = watch(page);
  const runWith = async (method, workers) => {
    await open(page);
    await drop(page, 'chain.csv', chainCsv(150));
    await expect(page.getByTestId('rows')).toHaveText('150');
    await page.getByTestId('method-select').selectOption(method);
    const exact = method === 'exact' ? { max_parents: 2 } : {};
    await setFields(page, { ...QUICK, restarts: 2, workers, ...exact });
    await runToEnd(page, 200_000);
    await expect(page.getByTestId('worker-count')).toHaveAttribute('data-workers', String(workers));
    await expect(page.getByTestId('worker-count')).toHaveText(workers === 1 ? '1 worker computes' : `${workers} workers compute`);
    const edges = await page.getByTestId('dag-svg').locator('path[data-edge]')
      .evaluateAll((ps) => ps.map((p) => p.getAttribute('data-edge')).sort());
    const table = method === 'cgp'
      ? await page.getByTestId('restarts').locator('tbody').innerText()
      : '';
    return { edges, table };
  };
  for (const method of ['cgp', 'exact']) {
    const one = await runWith(method, 1);
    const three = await runWith(method, 3);
    if (method === 'cgp') await shot(page, 'app-17-three-workers', info);
    expect(one.edges.length, method).toBeGreaterThan(0);
    expect(three.edges, method).toEqual(one.edges);
    // Each restart's evidence, to the digit shown, is the same too.
    expect(three.table, method).toEqual(one.table);
  }
  expect(seen.errors).toEqual([]);
});

test('with a pool, a long starting fit keeps the run alive and a stop acts at once', async ({ page }, info) => {
  // On the #test-hooks page the watchdog ends a worker silent for 3 s. With 2 compute workers the
  // coordinating worker waits on a starting fit (1000 rows, M = 400) far longer than that: the
  // compute workers' beats must reach the page through it. It stays free, so a stop is read at
  // once, without the 2 s grace that ends a busy worker.
  await open(page, '#test-hooks');
  await pick(page, 'chain.csv', chainCsv(1000));
  await expect(page.getByTestId('rows')).toHaveText('1000');
  await setFields(page, { max_rows: '1000', inducing_points: '400', start_iterations: '1000', restarts: '2', workers: '2' });
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('worker-count')).toHaveAttribute('data-workers', '2');
  await page.waitForTimeout(8000);
  await expect(page.getByTestId('error')).toHaveCount(0);
  await expect(page.getByTestId('status')).toHaveText(/running/);
  const clicked = Date.now();
  await page.getByTestId('stop-button').click();
  await expect(page.getByTestId('status')).toHaveText('stopped', { timeout: 5000 });
  expect(Date.now() - clicked).toBeLessThan(1500);
  await expect(page.getByTestId('error')).toHaveCount(0);
  await shot(page, 'app-18-pool-stopped-in-a-long-fit', info);
  // The next run starts on a fresh pool.
  await setFields(page, { ...QUICK, max_rows: '100' });
  await runToEnd(page);
});

/** Five variables a → b → c, a → d, d → e with nonlinear mechanisms (seeded, like chainCsv). */
function fiveCsv(rows) {
  let seed = 11;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648 - 0.5;
  };
  let text = 'a,b,c,d,e\n';
  for (let n = 0; n < rows; n++) {
    const a = 2 * rand() + Math.sin(n * 0.37);
    const b = Math.tanh(1.5 * a) + 0.3 * rand();
    const c = b * b + 0.3 * rand();
    const d = Math.sin(1.3 * a) + 0.3 * rand();
    const e = d * d * d + 0.3 * rand();
    text += [a, b, c, d, e].map((v) => v.toFixed(6)).join(',') + '\n';
  }
  return text;
}

/** The CSS-pixel centre of heatmap cell (row, column) of `canvas`, from its data-grid. */
async function cellCentre(canvas, row, column) {
  const [left, top, cell] = (await canvas.getAttribute('data-grid')).split(',').map(Number);
  const drawn = (await canvas.getAttribute('data-css-size')).split('x').map(Number);
  const box = await canvas.boundingBox();
  return {
    x: (left + (column + 0.5) * cell) * (box.width / drawn[0]),
    y: (top + (row + 0.5) * cell) * (box.height / drawn[1]),
  };
}

test('a running exact search shows its best graph so far; clicking a cell or an edge of the result explains it', async ({ page }, info) => {
  test.setTimeout(240_000);
  const seen = watch(page);
  await open(page, '', { method: 'exact' });
  // 80 rows, not 150: the fits are cheaper and the test about twice as fast (development VM).
  await drop(page, 'five.csv', fiveCsv(80));
  await expect(page.getByTestId('rows')).toHaveText('80');
  // One worker fits one family per step, so the larger families arrive one at a time.
  await setFields(page, { max_rows: 80, workers: 1 });
  await page.getByTestId('run-button').click();
  const families = page.getByTestId('families-progress');
  // Once screening is over, the best graph over the families scored so far is drawn and the
  // heatmap holds each edge's probability so far.
  await expect(families).toHaveAttribute('data-live-score', /^-?\d/, { timeout: 120_000 });
  await expect(page.getByTestId('status')).toHaveText(/running/);
  await expect(page.locator('.live figcaption').first()).toContainText('families scored so far');
  await expect(page.getByTestId('phase')).toContainText('best graph over the families scored so far');
  expect(await page.getByTestId('dag-svg').locator('path[data-edge]').count()).toBeGreaterThan(0);
  // Nothing to click while the search runs.
  expect(await page.getByTestId('dag-svg').locator('path[data-edge-hit]').count()).toBe(0);
  await shot(page, 'app-19-exact-live-best-so-far', info);
  // The live score only rises as families are scored.
  const scores = [];
  while ((await page.getByTestId('status').innerText()) === 'running') {
    const v = await families.getAttribute('data-live-score').catch(() => null);
    if (v) scores.push(Number(v));
    await page.waitForTimeout(250);
  }
  await expect(page.getByTestId('status')).toHaveText('done');
  for (let k = 1; k < scores.length; k++) expect(scores[k]).toBeGreaterThanOrEqual(scores[k - 1] - 1e-3);

  // The result: click the heatmap cell of a drawn edge, a pair the graph leaves out, and an edge.
  const edges = await page.getByTestId('dag-svg').locator('path[data-edge]')
    .evaluateAll((ps) => ps.map((p) => p.getAttribute('data-edge').split('->').map(Number)));
  expect(edges.length).toBeGreaterThan(0);
  const names = ['a', 'b', 'c', 'd', 'e'];
  const explanation = page.getByTestId('edge-explanation');
  const canvas = page.getByTestId('adjacency-canvas');
  const [i, j] = edges[0];
  await canvas.click({ position: await cellCentre(canvas, i, j) });
  await expect(explanation.locator('p[data-state="ready"]')).toHaveAttribute('data-edge', `${i}->${j}`, { timeout: 60_000 });
  await expect(explanation.locator('p[data-state="ready"]')).toHaveAttribute('data-added', 'false');
  await expect(explanation).toContainText(`Removing ${names[i]} → ${names[j]}`);
  // The reversed cell asks about the same edge.
  await canvas.click({ position: await cellCentre(canvas, j, i) });
  await expect(explanation.locator('p[data-state="ready"]')).toHaveAttribute('data-edge', `${i}->${j}`, { timeout: 60_000 });
  const joined = new Set(edges.flatMap(([a, b]) => [`${a}-${b}`, `${b}-${a}`]));
  const pairs = [];
  for (let a = 0; a < 5; a++) for (let b = 0; b < 5; b++) if (a !== b && !joined.has(`${a}-${b}`)) pairs.push([a, b]);
  expect(pairs.length).toBeGreaterThan(0);
  const [p, q] = pairs[0];
  await canvas.click({ position: await cellCentre(canvas, p, q) });
  const added = explanation.locator('p[data-state="ready"][data-added="true"]');
  await expect(added).toBeVisible({ timeout: 60_000 });
  await expect(added).toContainText('which the graph leaves out');
  await expect(added).toContainText(/the data favour (leaving .* out|adding|neither leaving)/i);
  await shot(page, 'app-20-a-left-out-pair-explained', info);
  // The posterior's heatmap under the result answers clicks too.
  const probabilities = page.getByTestId('edge-probabilities-canvas');
  await probabilities.scrollIntoViewIfNeeded();
  await probabilities.click({ position: await cellCentre(probabilities, i, j) });
  await expect(explanation.locator('p[data-state="ready"]')).toHaveAttribute('data-edge', `${i}->${j}`, { timeout: 60_000 });
  // An edge of the drawn graph: its wide transparent stroke takes the click.
  const [u, v] = edges[edges.length - 1];
  await page.getByTestId('dag-svg').locator(`path[data-edge-hit="${u}->${v}"]`).dispatchEvent('click');
  await expect(explanation.locator('p[data-state="ready"]')).toHaveAttribute('data-edge', `${u}->${v}`, { timeout: 60_000 });
  // The saved SVG holds the drawing, not the click targets.
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByTestId('export-svg').click(),
  ]);
  const svg = fs.readFileSync(await download.path(), 'utf8');
  expect(svg).toContain('data-edge=');
  expect(svg).not.toContain('data-edge-hit');
  expect(seen.errors).toEqual([]);
});

test('an exact run on one worker stops at once inside its fits, goes on from its scores when run again, and survives a dead worker', async ({ page }, info) => {
  test.setTimeout(300_000);
  const seen = watch(page);
  await open(page, '#test-hooks', { method: 'exact' });
  // 80 rows, not 150: the fits are cheaper and the test about twice as fast (development VM).
  await drop(page, 'five.csv', fiveCsv(80));
  await expect(page.getByTestId('rows')).toHaveText('80');
  await setFields(page, { max_rows: 80, workers: 1 });
  const status = page.getByTestId('status');
  const summary = page.getByTestId('exact-summary');
  const families = page.getByTestId('families-progress');
  const edgesDrawn = () => page.getByTestId('dag-svg').locator('path[data-edge]')
    .evaluateAll((ps) => ps.map((p) => p.getAttribute('data-edge')).sort());
  // Uninterrupted: every planned family fitted once.
  await runToEnd(page, 200_000);
  const all = Number(await summary.getAttribute('data-fitted'));
  expect(all).toBeGreaterThan(25);
  expect(Number(await summary.getAttribute('data-cache-hits'))).toBe(0);

  // Another seed, so nothing is in the worker's scores yet; stopped once the larger families
  // are being fitted. The fits run in a compute worker, so this one reads the stop at once.
  await setFields(page, { seed: 1 });
  await page.getByTestId('run-button').click();
  await expect(families).toHaveAttribute('data-live-score', /^-?\d/, { timeout: 120_000 });
  const clicked = Date.now();
  await page.getByTestId('stop-button').click();
  await expect(status).toHaveText('stopped', { timeout: 5000 });
  expect(Date.now() - clicked).toBeLessThan(1500);
  await expect(page.getByTestId('error')).toHaveCount(0);
  expect((await edgesDrawn()).length).toBeGreaterThan(0);
  const before = Number(await summary.getAttribute('data-fitted'));
  expect(before).toBeGreaterThan(0);
  expect(before).toBeLessThan(all);
  await shot(page, 'app-21-exact-stopped-at-once', info);
  // Run again: what was scored comes from the cache, the rest is fitted, nothing twice.
  await runToEnd(page, 200_000);
  const after = Number(await summary.getAttribute('data-fitted'));
  expect(Number(await summary.getAttribute('data-cache-hits'))).toBeGreaterThanOrEqual(before);
  expect(before + after).toBe(all);
  await expect(summary).toContainText(`${before} read from the cache`);

  // A worker that dies midway: the run goes on from its last save in a fresh worker, and ends
  // with every family fitted once (those fitted after the save again, none twice).
  await setFields(page, { seed: 2 });
  await page.getByTestId('run-button').click();
  await expect(status).toHaveAttribute('data-saved', 'true', { timeout: 60_000 });
  await expect(status).toHaveText(/running/);
  await page.getByTestId('crash-worker').click();
  await expect(page.getByTestId('error')).toContainText('internal error');
  await page.getByTestId('resume-run').click();
  await expect(page.getByTestId('error')).toHaveCount(0);
  await expect(status).toHaveText('done', { timeout: 200_000 });
  expect(Number(await summary.getAttribute('data-fitted'))).toBe(all);
  expect((await edgesDrawn()).length).toBeGreaterThan(0);
  expect(seen.errors.filter((e) => !/panicked|internal error|deliberate/.test(e))).toEqual([]);
});
