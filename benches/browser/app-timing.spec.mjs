// For each example: seconds to `done`, snapshots per second, the longest gap between snapshots,
// main-thread long tasks, and the metrics against the example's own truth (OCCAM_BENCH_EXAMPLES
// picks examples, comma-separated; default chain,sachs,syntren01; OCCAM_BENCH_WORKERS the compute
// workers, comma-separated, each timed in turn; default 1). The edges are printed so runs with
// different pool sizes can be checked to find the same graph.
import os from 'node:os';
import { test, expect } from '@playwright/test';

const examples = (process.env.OCCAM_BENCH_EXAMPLES || 'chain,sachs,syntren01').split(',');
const pools = (process.env.OCCAM_BENCH_WORKERS || '1').split(',');

for (const stem of examples) for (const workers of pools) {
  test(`timing ${stem} with ${workers} compute workers`, async ({ page }) => {
    await page.addInitScript(() => {
      window.__longTasks = [];
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) window.__longTasks.push(e.duration);
      }).observe({ type: 'longtask', buffered: true });
    });
    await page.goto('/');
    await expect(page.getByTestId('backend-badge')).toHaveAttribute('data-backend', 'cpu');
    await page.getByTestId('example-select').selectOption(stem);
    await expect(page.getByTestId('status')).toHaveText('ready');
    await page.locator('input[data-field="workers"]').fill(workers);
    await page.evaluate(() => { window.__longTasks.length = 0; });
    const status = page.getByTestId('status');
    const t0 = Date.now();
    await page.getByTestId('run-button').click();
    let last = 0;
    let lastT = Date.now();
    let maxGap = 0;
    for (;;) {
      await page.waitForTimeout(100);
      const n = Number(await status.getAttribute('data-snapshots'));
      if (n !== last) {
        maxGap = Math.max(maxGap, Date.now() - lastT);
        last = n;
        lastT = Date.now();
      }
      const s = await status.textContent();
      if (s === 'done' || s === 'failed') break;
    }
    const seconds = (Date.now() - t0) / 1000;
    const longTasks = await page.evaluate(() => window.__longTasks);
    const metrics = await page.locator('[data-metric]').evaluateAll((cells) =>
      Object.fromEntries(cells.map((c) => [c.dataset.metric, c.textContent])));
    const edges = await page.getByTestId('dag-svg').locator('path[data-edge]')
      .evaluateAll((ps) => ps.map((p) => p.getAttribute('data-edge')).sort());
    console.log(JSON.stringify({
      example: stem,
      workers: await page.getByTestId('worker-count').getAttribute('data-workers'),
      cores: os.cpus().length,
      edges: edges.join(' '),
      status: await status.textContent(),
      seconds,
      snapshots_per_second: +(last / seconds).toFixed(2),
      longest_gap_ms: maxGap,
      long_tasks: longTasks.length,
      longest_task_ms: Math.max(0, ...longTasks),
      metrics,
    }));
  });
}
