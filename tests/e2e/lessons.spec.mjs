// The guided lessons: each one opens from the list, steps through with its buttons (and the Run
// and "Why?" buttons where the step asks the student to press them), and completes. A screenshot of
// every step is kept under screenshots/lesson-<id>-<step>-<project>.png.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, expect } from '@playwright/test';
import { open, shot, watch, foreignRequests } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const lessonIds = JSON.parse(fs.readFileSync(path.resolve(here, '../../www/lessons/index.json'), 'utf8'));

/** Does what the step's check still asks of the student until it holds (or time runs out). */
async function satisfy(page, deadline) {
  const check = page.getByTestId('lesson-check');
  while (Date.now() < deadline) {
    if ((await check.getAttribute('data-status')) === 'done') return;
    const text = await check.textContent();
    const run = page.getByTestId('run-button');
    if (/run the search/.test(text) && (await run.isEnabled())) {
      await run.click();
      await expect(page.getByTestId('status')).toHaveText(/done|stopped/, { timeout: 240_000 });
    } else if (/press “Why\?”/.test(text)) {
      await page.getByTestId('explain-edge').first().click({ timeout: 30_000 });
      await expect(page.getByTestId('edge-explanation').locator('[data-state="ready"]').first())
        .toBeVisible({ timeout: 90_000 });
    } else {
      // Data loading or a refit under way: look again shortly.
      await page.waitForTimeout(300);
    }
  }
  await expect(check).toHaveAttribute('data-status', 'done');
}

for (const id of lessonIds) {
  test(`lesson ${id} opens, steps through and completes`, async ({ page, baseURL }, info) => {
    test.setTimeout(600_000);
    const seen = watch(page);
    await open(page);
    const list = page.getByTestId('lesson-list');
    await expect(list).toBeVisible();
    await list.locator(`[data-testid="lesson-open"][data-lesson="${id}"]`).click();
    const step = page.getByTestId('lesson-step');
    await expect(step).toHaveAttribute('data-lesson', id);
    const total = Number(await step.getAttribute('data-steps'));
    expect(total).toBeGreaterThan(0);
    for (let k = 1; k <= total; k++) {
      await expect(step).toHaveAttribute('data-step', String(k));
      const action = page.getByTestId('lesson-action');
      if ((await action.count()) > 0) {
        // Next waits for the step's button: a result from an earlier step does not count.
        const next = page.getByTestId(k < total ? 'lesson-next' : 'lesson-finish');
        await expect(next).toBeDisabled();
        await expect(action).toBeEnabled({ timeout: 60_000 });
        await action.click();
        await expect(page.getByTestId('lesson-action-error')).toHaveCount(0);
        await expect(action).toHaveAttribute('data-done', 'yes');
      }
      await satisfy(page, Date.now() + 300_000);
      if (id === 'independence' && k === 2) {
        // Three variables: every one of the 25 DAGs can be read, class by class.
        const all = page.getByTestId('lesson-posterior-all');
        await all.locator('summary').click();
        expect(await all.locator('li').count()).toBeGreaterThan(3);
        await expect(all).toContainText('A → B, B → C (');
        await expect(all).toContainText('no edges (');
      }
      await shot(page, `lesson-${id}-${k}`, info);
      if (k < total) {
        await page.getByTestId('lesson-next').click();
      }
    }
    await page.getByTestId('lesson-finish').click();
    // Back at the list, the lesson marked completed.
    await expect(list.locator(`li:has([data-lesson="${id}"])`)).toHaveAttribute('data-completed', 'yes');
    await shot(page, `lesson-${id}-done`, info);
    expect(seen.errors).toEqual([]);
    expect(foreignRequests(seen, baseURL)).toEqual([]);
  });
}

test('cause or effect shows both directions side by side and the exact posterior by class', async ({ page }, info) => {
  test.setTimeout(300_000);
  await open(page);
  await page.locator('[data-testid="lesson-open"][data-lesson="cause-or-effect"]').click();
  const step = page.getByTestId('lesson-step');
  await page.getByTestId('lesson-action').click();
  await satisfy(page, Date.now() + 60_000);
  await page.getByTestId('lesson-next').click();
  await page.getByTestId('lesson-action').click();
  await expect(page.getByTestId('method-select')).toHaveValue('exact');
  await satisfy(page, Date.now() + 240_000);
  // Two variables: three DAGs, the two directions one class whose members keep their own
  // probabilities.
  const posterior = page.getByTestId('lesson-posterior');
  await expect(posterior).toContainText('all 3 DAGs scored');
  await expect(posterior.locator('li').first()).toContainText('altitude — temperature');
  await expect(posterior.locator('li').first()).toContainText('altitude → temperature (');
  await page.getByTestId('lesson-next').click();
  await page.getByTestId('lesson-action').click();
  await satisfy(page, Date.now() + 90_000);
  await page.getByTestId('lesson-next').click();
  await expect(step).toHaveAttribute('data-step', '4');
  await page.getByTestId('lesson-action').click();
  const directions = page.getByTestId('directions');
  await expect(directions).toBeVisible({ timeout: 90_000 });
  await expect(page.getByTestId('direction-curve')).toHaveCount(2);
  await expect(directions.locator('[data-direction="forward"]')).toContainText('altitude → temperature');
  await expect(directions.locator('[data-direction="backward"]')).toContainText('temperature → altitude');
  // The evidence favours the true direction, and says so in words.
  const reversed = Number(await directions.getAttribute('data-reversed'));
  expect(reversed).toBeLessThan(0);
  await expect(page.getByTestId('directions-verdict')).toContainText('Bayes factor of about');
  await expect(page.getByTestId('lesson-check')).toHaveAttribute('data-status', 'done');
  await shot(page, 'lesson-directions', info);
});
