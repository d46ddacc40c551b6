// The GPU path in the page: with a WebGPU adapter (Chromium's SwiftShader, `--enable-unsafe-webgpu`)
// a run with the uncollapsed bound computes its evaluations on it and the badge says WebGPU with the
// adapter; without one the same run computes on the CPU and the badge says CPU. Either way the graph
// is the example's truth (altitude → temperature, SHD 0). Destroying the device
// mid-run (test hook) switches the run to the CPU, shown on the badge, and the run still finishes.
// A run with the collapsed bound times its first iterations on the device and on the CPU and
// computes the rest on the faster, and says so; a test hook sends every Ψ2 to the device.
import { test, expect } from '@playwright/test';
import { open, setFields, shot, watch, foreignRequests } from './helpers.mjs';

/** A short run with the paper preset's (uncollapsed) bound, about 160 iterations of two variables
 * at M = 10, b = 32, S = 5 and Adam's 0.01: natively (`occam discover --preset paper --method cgp
 * --settings` with these values) seeds 0, 1 and 2 orient altitude → temperature on the CPU, and
 * seeds 0 and 1 on lavapipe (119 steady-state iterations, 2026-11-29). The sizes and the schedule
 * are small because a software rasteriser is slow at the M × M algebra's shaders: at M = 20,
 * b = 128 this test took 4.6 minutes (2026-11-28), at 350 iterations 2.8 minutes on CI, at these
 * 160 iterations 37 s on the 2-core development VM (2026-11-29). */
const SHORT_UNCOLLAPSED = {
  restarts: 1,
  max_rows: 300,
  inducing_points: 10,
  batch_size: 32,
  samples: 5,
  learning_rate: 0.01,
  warmup_min: 40,
  warmup_max: 40,
  acyclic_max: 60,
  cooldown_min: 20,
  cooldown_max: 20,
  start_iterations: 40,
  seed: 0,
};

/** Chooses the built-in example `example` and waits until its data are summarised. */
async function loadExample(page, example) {
  await page.getByTestId('example-select').selectOption(example);
  await expect(page.getByTestId('data-summary')).toContainText(`${example}.csv`);
}

/** The page reported no error and asked nothing of any other origin. */
function expectQuiet(seen, baseURL) {
  expect(seen.errors).toEqual([]);
  expect(foreignRequests(seen, baseURL)).toEqual([]);
}

/** Starts the exact search (the method `auto` picks for two variables) on the loaded example. */
async function startExactRun(page) {
  // The examples open with the method that teaches them best; a CSV opens with `auto`.
  await page.getByTestId('method-select').selectOption('auto');
  // 100 of the 349 rows: the family fits on a software rasteriser are slow. Natively (`occam
  // discover --method exact --exact-few-rows 100`) seeds 0, 1 and 2 orient the pair on the CPU,
  // and seed 0 on lavapipe.
  await setFields(page, { seed: 0, exact_few_rows: 100 });
  await page.getByTestId('run-button').click();
}

/** What a measured run's probe chose, as the page shows it: with an adapter, `work` timed on both
 * sides (`checkJobs(choice)` checks how many) and the badge naming the side chosen, with
 * `cpuTitle` in its title when that is the CPU; without one, no choice shown and the CPU. */
async function expectMeasuredChoice(page, gpu, { work, checkJobs, cpuTitle }) {
  const choice = page.getByTestId('device-choice');
  const badge = page.getByTestId('backend-badge');
  if (!gpu) {
    await expect(choice).toHaveCount(0);
    await expect(badge).toHaveAttribute('data-backend', 'cpu');
    return;
  }
  await expect(choice).toHaveAttribute('data-work', work);
  const chosen = await choice.getAttribute('data-chosen');
  expect(['GPU', 'CPU']).toContain(chosen);
  await checkJobs(choice);
  await expect(badge).toHaveAttribute('data-backend', chosen === 'GPU' ? 'webgpu' : 'cpu');
  if (chosen === 'CPU') await expect(badge).toHaveAttribute('title', cpuTitle);
}

async function startShortRun(page, example) {
  await loadExample(page, example);
  await page.getByTestId('preset-select').selectOption('paper');
  await setFields(page, SHORT_UNCOLLAPSED);
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('status')).toHaveText(/running|done/);
}

test('a run with the uncollapsed bound computes on WebGPU when an adapter is offered, on the CPU otherwise, and orients the pair as the truth does', async ({ page, baseURL }, info) => {
  test.setTimeout(300_000);
  const gpu = info.project.metadata.adapter === 'available';
  const seen = watch(page);
  await open(page);
  const badge = page.getByTestId('backend-badge');
  await expect(badge).toHaveAttribute('data-backend', gpu ? 'webgpu' : 'cpu');
  await startShortRun(page, 'altitude_temperature');
  await expect(badge).toHaveAttribute('data-backend', gpu ? 'webgpu' : 'cpu');
  if (gpu) {
    await expect(badge).toContainText('WebGPU');
    await expect(badge).toContainText('swiftshader');
  } else {
    await expect(badge).toContainText('CPU');
  }
  await shot(page, 'webgpu-1-running', info);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 240_000 });
  await expect(badge).toHaveAttribute('data-switched', 'no');
  await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toHaveText('0');
  const traffic = page.getByTestId('gpu-traffic');
  await expect(page.getByTestId('result-summary')).toContainText(gpu ? 'on WebGPU (f32, ' : 'on CPU (f64, ');
  if (gpu) {
    // The same plan as the CLI's, counted the same way: one submission per iteration, nothing
    // created after the first, and the worker never blocks on the device.
    await expect(traffic).toBeVisible();
    const count = async (name) => Number(await traffic.getAttribute(`data-${name}`));
    const iterations = await count('iterations');
    // The short schedule counts 119 steady-state iterations natively on lavapipe.
    expect(iterations).toBeGreaterThan(50);
    expect(await count('submissions')).toBeLessThanOrEqual(iterations);
    expect(await count('submissions')).toBeGreaterThan(0);
    expect(await count('blocking-waits')).toBe(0);
    expect(await count('buffers-created')).toBe(0);
    expect(await count('bind-groups-created')).toBe(0);
    // Every steady iteration records the same kernel passes (the CLI's test pins them natively).
    const dispatches = await count('dispatches');
    expect(dispatches).toBeGreaterThan(0);
    expect(dispatches % iterations).toBe(0);
    // Copies are counted too, and each submission's results are read through one mapping.
    expect(await count('copies')).toBeGreaterThan(0);
    expect(await count('mappings')).toBe(await count('submissions'));
  } else {
    await expect(traffic).toHaveCount(0);
  }
  await shot(page, 'webgpu-2-done', info);
  expectQuiet(seen, baseURL);
});

test('a run whose GPU device is destroyed midway goes on on the CPU, shows the switch, and finishes', async ({ page, baseURL }, info) => {
  test.skip(info.project.metadata.adapter !== 'available', 'needs a WebGPU adapter');
  test.setTimeout(240_000);
  const seen = watch(page);
  await open(page, '#test-hooks');
  const badge = page.getByTestId('backend-badge');
  await expect(badge).toHaveAttribute('data-backend', 'webgpu');
  await startShortRun(page, 'altitude_temperature');
  await expect(badge).toHaveAttribute('data-backend', 'webgpu');
  // Well into the training phases, so units are on the device.
  await expect(page.getByTestId('phase')).toHaveAttribute('data-phase', /warm_up|acyclic/, { timeout: 120_000 });
  await page.getByTestId('lose-gpu').click();
  await expect(badge).toHaveAttribute('data-backend', 'cpu');
  await expect(badge).toHaveAttribute('data-switched', 'yes');
  await expect(badge).toContainText('switched from WebGPU');
  await expect(badge).toHaveAttribute('title', /GPU failed/);
  await shot(page, 'webgpu-3-switched', info);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 200_000 });
  await expect(page.getByTestId('result-summary')).toContainText('WebGPU failed and was left');
  await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toBeVisible();
  expectQuiet(seen, baseURL);
});

test('a run with the collapsed bound sends its Ψ2 sums to WebGPU (test hook: at every size) and orients the pair as the truth does', async ({ page, baseURL }, info) => {
  test.setTimeout(300_000);
  const gpu = info.project.metadata.adapter === 'available';
  const seen = watch(page);
  await open(page, '#test-hooks');
  const badge = page.getByTestId('backend-badge');
  // Unforced, the probe would place this small run on the CPU (SwiftShader is a CPU rasteriser,
  // test below); the hook puts every collapsed Ψ2 on the device, so the small example exercises
  // the collapsed GPU path.
  await page.getByTestId('psi2-gpu-always').click();
  await loadExample(page, 'altitude_temperature');
  await page.getByTestId('preset-select').selectOption('interactive');
  // 100 rows, not the preset's 200: half the rows for Ψ2 on a software rasteriser (this test
  // 1.4 → 1.2 minutes on the development VM). Natively (`occam discover --method cgp --max-rows
  // 100 --restarts 1`) seeds 0, 1 and 2 orient the pair; at 120 rows seed 0 does not, so this
  // size holds for the seeds checked, not beyond.
  await setFields(page, { restarts: 1, seed: 0, max_rows: 100 });
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('status')).toHaveText(/running|done/);
  await expect(badge).toHaveAttribute('data-backend', gpu ? 'webgpu' : 'cpu');
  if (gpu) await expect(badge).toHaveAttribute('title', /Ψ2 sums in double-float/);
  await shot(page, 'webgpu-4-collapsed', info);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 280_000 });
  await expect(badge).toHaveAttribute('data-switched', 'no');
  await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toHaveText('0');
  if (gpu) {
    // The units really were on the device: destroying it in a second run switches that run to
    // the CPU (a run computing on the CPU would never notice), and the run still finishes.
    await page.getByTestId('run-button').click();
    await expect(page.getByTestId('phase')).toHaveAttribute('data-phase', /warm_up|acyclic/, { timeout: 60_000 });
    await page.getByTestId('lose-gpu').click();
    await expect(badge).toHaveAttribute('data-switched', 'yes', { timeout: 60_000 });
    await expect(badge).toHaveAttribute('data-backend', 'cpu');
    await expect(page.getByTestId('status')).toHaveText('done', { timeout: 120_000 });
    await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toHaveText('0');
  }
  expectQuiet(seen, baseURL);
});

test('a collapsed run (the interactive preset) times its first iterations on WebGPU and on the CPU, computes the rest on the faster, and says so', async ({ page, baseURL }, info) => {
  test.setTimeout(240_000);
  const gpu = info.project.metadata.adapter === 'available';
  const seen = watch(page);
  await open(page);
  const badge = page.getByTestId('backend-badge');
  await loadExample(page, 'altitude_temperature');
  await page.getByTestId('method-select').selectOption('cgp');
  await page.getByTestId('preset-select').selectOption('interactive');
  // The same size as the forced test above (seed 0 orients the pair at 100 rows).
  await setFields(page, { restarts: 1, seed: 0, max_rows: 100 });
  await page.getByTestId('run-button').click();
  await expect(page.getByTestId('status')).toHaveText(/running|done/);
  if (gpu) await expect(badge).toHaveAttribute('title', /timed with their Ψ2 sums on WebGPU and on the CPU|faster here/);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 220_000 });
  await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toHaveText('0');
  // Three iterations on each side, the first of each untimed, then the faster for the rest.
  await expectMeasuredChoice(page, gpu, {
    work: 'collapsed search iterations',
    checkJobs: async (choice) => {
      expect(await choice.getAttribute('data-device-jobs')).toBe('2');
      expect(await choice.getAttribute('data-cpu-jobs')).toBe('2');
      await expect(choice).toContainText('measured on 2 GPU and 2 CPU jobs');
    },
    cpuTitle: /collapsed search computes on the CPU, which is faster here/,
  });
  await shot(page, 'webgpu-6-collapsed-measured', info);
  expectQuiet(seen, baseURL);
});

test('the default run (the exact search) times its family fits on WebGPU and on the CPU, fits the rest on the faster, and says so', async ({ page, baseURL }, info) => {
  test.setTimeout(240_000);
  const gpu = info.project.metadata.adapter === 'available';
  const seen = watch(page);
  await open(page);
  await loadExample(page, 'altitude_temperature');
  await startExactRun(page);
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 200_000 });
  await expect(page.getByTestId('result-method')).toHaveText('exact');
  await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toHaveText('0');
  // Two families timed on each side (the four families of two variables: while the probe
  // measures, every family unit is timed), the rest placed on the faster: on SwiftShader, a
  // CPU rasteriser, that is the CPU, and the badge says why.
  await expectMeasuredChoice(page, gpu, {
    work: 'family fits',
    checkJobs: async (choice) => {
      const jobs = Number(await choice.getAttribute('data-device-jobs')) + Number(await choice.getAttribute('data-cpu-jobs'));
      expect(jobs).toBe(4);
      await expect(choice).toContainText(/measured on|given up/);
    },
    cpuTitle: /family fits compute on the CPU, which is faster here/,
  });
  await shot(page, 'webgpu-5-exact-measured', info);
  expectQuiet(seen, baseURL);
});

test('family fits placed on WebGPU (test hook) run there in lockstep, the badge says WebGPU, and the graph is the CPU\'s', async ({ page, baseURL }, info) => {
  test.skip(info.project.metadata.adapter !== 'available', 'needs a WebGPU adapter');
  test.setTimeout(300_000);
  const seen = watch(page);
  await open(page, '#test-hooks');
  const badge = page.getByTestId('backend-badge');
  await page.getByTestId('families-gpu-always').click();
  await loadExample(page, 'altitude_temperature');
  await startExactRun(page);
  await expect(badge).toHaveAttribute('data-backend', 'webgpu');
  await expect(page.getByTestId('status')).toHaveText('done', { timeout: 280_000 });
  await expect(page.getByTestId('result-method')).toHaveText('exact');
  await expect(page.getByTestId('metrics').locator('[data-metric="shd"]')).toHaveText('0');
  const choice = page.getByTestId('device-choice');
  await expect(choice).toHaveAttribute('data-chosen', 'GPU');
  await expect(choice).toHaveAttribute('data-device-jobs', '4');
  await expect(choice).toContainText('forced');
  await expect(page.getByTestId('result-summary')).toContainText('on WebGPU (f32, ');
  await expect(badge).toHaveAttribute('data-switched', 'no');
  await shot(page, 'webgpu-6-exact-on-gpu', info);
  expectQuiet(seen, baseURL);
});
