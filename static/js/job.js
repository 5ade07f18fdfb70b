// Job detail: while the job waits or runs, refresh its log tail, and reload the page when
// what it shows of the job changes (its state, why it waits, its estimate: data-watch).
(function () {
  "use strict";
  const log = document.getElementById("log");
  if (!log || log.dataset.live !== "1") return;
  const every = 3000;
  async function refresh() {
    try {
      const response = await fetch(log.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      const data = await response.json();
      const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.textContent = data.log || "(no output yet)";
      if (atBottom) log.scrollTop = log.scrollHeight;
      if (data.state !== log.dataset.state || data.watch !== log.dataset.watch) { window.location.reload(); return; }
    } catch (e) { /* the next tick retries */ }
    window.setTimeout(refresh, every);
  }
  window.setTimeout(refresh, every);
})();
