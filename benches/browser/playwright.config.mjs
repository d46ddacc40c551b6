// Browser timing benchmark (not part of the test command): runs built-in examples with the default
// interactive preset in Debian's headless Chromium against the release build in dist/ and prints
// one JSON line per example. Build first (trunk build --release), then:
//   npx playwright test --config benches/browser/playwright.config.mjs
import { defineConfig } from '@playwright/test';

const PORT = Number(process.env.OCCAM_BENCH_PORT || 4179);

export default defineConfig({
  testDir: '.',
  outputDir: '../../test-results/bench',
  timeout: 900_000,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${PORT}`,
    headless: true,
    launchOptions: { executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-quic', '--no-first-run'] },
  },
  webServer: {
    command: `node ../../tests/e2e/serve.mjs ${PORT} ../../dist`,
    url: `http://127.0.0.1:${PORT}/index.html`,
    reuseExistingServer: false,
  },
});
