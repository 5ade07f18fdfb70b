// A simulator run (preview or replay): follow its progress through the API; reload the page
// once it is done or failed, which then shows the figures or why there are none.
(function () {
  "use strict";
  const state = document.getElementById("simulation-state");
  const bar = document.getElementById("simulation-progress");
  if (!state || !bar) return;
  const every = 1000;
  async function poll() {
    try {
      const response = await fetch(state.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) {
        const data = await response.json();
        bar.value = data.progress;
        if (data.state === "done" || data.state === "failed") { window.location.reload(); return; }
      }
    } catch (e) { /* the next poll retries */ }
    window.setTimeout(poll, every);
  }
  window.setTimeout(poll, every);
})();
