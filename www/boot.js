// Starts the page's WebAssembly. A module file rather than the inline script Trunk would inject,
// so the Content-Security-Policy in index.html can refuse every inline script.
import init from './app.js';

init({ module_or_path: './app_bg.wasm' }).catch((error) => {
  const box = document.getElementById('fatal');
  box.textContent = `Occam could not start: ${error}. This page needs WebAssembly with SIMD (Chrome 91, Firefox 89, Safari 16.4 or newer); reload to try again.`;
  box.setAttribute('data-testid', 'error');
  box.hidden = false;
});
