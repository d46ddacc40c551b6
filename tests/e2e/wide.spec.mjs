// End-to-end test of a wide data set, as a class will bring: the built-in 20-variable SynTReN
// example. The knowledge grid scrolls inside its panel without widening the page, the heatmap
// names every variable on both axes, and a stopped run's progress bar shows where it stopped.
// Screenshots go to screenshots/ (git-ignored).
import { test, expect } from '@playwright/test';
import path from 'node:path';
import { watch, foreignRequests, shot, shots, open, setFields } from './helpers.mjs';

/** A run of 20 variables that goes on long enough to be stopped part-way. */
const SLOW = {
  restarts: 1,
  max_rows: 200,
  inducing_points: 15,
  warmup_min: 1000,
  warmup_max: 1000,
  acyclic_max: 1000,
  cooldown_min: 100,
  cooldown_max: 100,
  start_iterations: 40,
};

test('20 variables: the knowledge grid scrolls in its panel, the heatmap names all, a stopped run shows where it stopped', async ({ page, baseURL }, info) => {
  test.setTimeout(180_000);
  const seen = watch(page);
  await open(page);
  await page.getByTestId('example-select').selectOption('syntren01');
  await expect(page.getByTestId('columns')).toHaveText('20');
  await expect(page.getByTestId('status')).toHaveText('ready');

  // The grid scrolls inside its own container; neither its panel nor the page grows.
  const grid = page.getByTestId('knowledge-grid');
  await expect(grid.locator('thead th.effect')).toHaveCount(20);
  const fit = await grid.evaluate((table) => {
    const box = table.closest('[data-testid=knowledge-scroll]');
    const panel = table.closest('.panel');
    const column = panel.parentElement;
    return {
      scrollWidth: box.scrollWidth,
      clientWidth: box.clientWidth,
      boxRight: box.getBoundingClientRect().right,
      panelWidth: panel.getBoundingClientRect().width,
      panelRight: panel.getBoundingClientRect().right,
      columnWidth: column.getBoundingClientRect().width,
      pageWidth: document.documentElement.scrollWidth,
      viewport: window.innerWidth,
    };
  });
  expect(fit.scrollWidth, JSON.stringify(fit)).toBeGreaterThan(fit.clientWidth);
  expect(fit.panelWidth, JSON.stringify(fit)).toBeLessThanOrEqual(fit.columnWidth + 0.5);
  expect(fit.boxRight, JSON.stringify(fit)).toBeLessThanOrEqual(fit.panelRight);
  expect(fit.pageWidth, JSON.stringify(fit)).toBeLessThanOrEqual(fit.viewport);

  // Every column header names its variable in full (title), and the last one scrolls into view
  // inside the container, next to the sticky row headers.
  const headers = grid.locator('thead th.effect');
  expect(await headers.evaluateAll((hs) => hs.map((h) => h.getAttribute('title')))).toEqual(
    Array.from({ length: 20 }, (_, k) => `X${k + 1}`),
  );
  const last = headers.last();
  await last.scrollIntoViewIfNeeded();
  await expect(last).toBeInViewport();
  const placed = await last.evaluate((th) => {
    const box = th.closest('[data-testid=knowledge-scroll]');
    const r = th.getBoundingClientRect();
    const b = box.getBoundingClientRect();
    const rowHeader = th.closest('table').querySelector('tbody th.cause').getBoundingClientRect();
    return {
      scrolled: box.scrollLeft,
      inside: r.left >= b.left - 0.5 && r.right <= b.right + 0.5,
      rowHeaderVisible: rowHeader.left >= b.left - 0.5 && rowHeader.right <= b.right + 0.5,
    };
  });
  expect(placed.scrolled).toBeGreaterThan(0);
  expect(placed.inside).toBe(true);
  expect(placed.rowHeaderVisible, 'the row headers stay in view while scrolling').toBe(true);
  // The cells at the far end still work.
  const far = grid.locator('[data-testid=knowledge-cell][data-from="0"][data-to="19"]');
  await far.click();
  await expect(far).toHaveAttribute('data-rule', 'forbidden');
  await far.click();
  await far.click();
  await expect(far).toHaveAttribute('data-rule', 'free');
  await shot(page, 'wide-1-grid-scrolled', info);
  await grid.locator('xpath=ancestor::section').screenshot({
    path: path.join(shots, `wide-1b-grid-panel-${info.project.name}.png`),
  });

  // A run, stopped early.
  await setFields(page, SLOW);
  await page.getByTestId('run-button').click();
  const status = page.getByTestId('status');
  await expect(status).toHaveText('running');
  const canvas = page.getByTestId('adjacency-canvas');
  // Every variable is named on both axes of the heatmap as soon as a snapshot has weights.
  await expect(canvas).toHaveAttribute('data-row-labels', '20', { timeout: 60_000 });
  await expect(canvas).toHaveAttribute('data-column-labels', '20');
  const progress = page.getByTestId('progress');
  const fraction = async () => Number(await progress.getAttribute('data-fraction'));
  await expect.poll(fraction, { timeout: 120_000 }).toBeGreaterThan(0.15);
  await shot(page, 'wide-2-running', info);
  await page.getByTestId('stop-button').click();
  await expect(status).toHaveText('stopped', { timeout: 30_000 });

  // The bar stays where the run stopped, marked as stopped.
  await expect(progress).toHaveAttribute('data-state', 'stopped');
  const stoppedAt = await fraction();
  expect(stoppedAt).toBeGreaterThan(0);
  expect(stoppedAt).toBeLessThan(1);
  expect(Number(await progress.evaluate((p) => p.value))).toBeCloseTo(stoppedAt, 2);
  const said = (await page.getByTestId('time-left').textContent()).match(/^stopped at (\d+) % · after /);
  expect(said, 'the text says where the run stopped').not.toBeNull();
  // The attribute has 3 decimals, the text whole percents.
  expect(Math.abs(Number(said[1]) - 100 * stoppedAt)).toBeLessThanOrEqual(1);
  await expect(canvas).toHaveAttribute('data-row-labels', '20');
  await expect(canvas).toHaveAttribute('data-column-labels', '20');
  expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
  await page.getByTestId('progress').scrollIntoViewIfNeeded();
  await shot(page, 'wide-3-stopped', info);
  await canvas.screenshot({ path: path.join(shots, `wide-4-heatmap-${info.project.name}.png`) });
  await page.locator('.progress-row').screenshot({
    path: path.join(shots, `wide-5-progress-${info.project.name}.png`),
  });

  // On a narrow screen (one column) the grid and the heatmap scroll in place; the page does not.
  await page.setViewportSize({ width: 640, height: 900 });
  await expect(canvas).toHaveAttribute('data-row-labels', '20');
  const narrow = await page.evaluate(() => ({
    page: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  }));
  expect(narrow.page, JSON.stringify(narrow)).toBeLessThanOrEqual(narrow.viewport);
  await shot(page, 'wide-6-narrow', info);
  await page.locator('section.run').screenshot({
    path: path.join(shots, `wide-6b-narrow-run-panel-${info.project.name}.png`),
  });
  expect(seen.errors).toEqual([]);
  expect(foreignRequests(seen, baseURL)).toEqual([]);
});
