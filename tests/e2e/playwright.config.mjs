// Browser tests: Debian's headless Chromium driven by Playwright, against the release build in dist/
// served on loopback by serve.mjs, which sends the headers `trunk serve` sends (the CSP above all).
import { defineConfig } from '@playwright/test';

const PORT = Number(process.env.OCCAM_E2E_PORT || 4178);

const chromiumArgs = [
  '--no-sandbox',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export default defineConfig({
  testDir: '.',
  outputDir: '../../test-results',
  timeout: 90_000,
  expect: { timeout: 20_000 },
  fullyParallel: false,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${PORT}`,
    browserName: 'chromium',
    headless: true,
  },
  projects: [
    {
      // With a WebGPU adapter on offer (SwiftShader): runs with the uncollapsed bound compute on it.
      name: 'webgpu',
      testMatch: /(smoke|webgpu)\.spec\.mjs/,
      metadata: { adapter: 'available' },
      use: {
        launchOptions: {
          executablePath: '/usr/bin/chromium',
          args: [...chromiumArgs, '--enable-unsafe-webgpu'],
        },
      },
    },
    {
      name: 'cpu',
      metadata: { adapter: 'none' },
      use: {
        launchOptions: { executablePath: '/usr/bin/chromium', args: chromiumArgs },
      },
    },
  ],
  webServer: {
    command: `node serve.mjs ${PORT} ../../dist`,
    url: `http://127.0.0.1:${PORT}/index.html`,
    reuseExistingServer: false,
    timeout: 30_000,
  },
});
