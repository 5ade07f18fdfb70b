// Job detail: while the job waits or runs, refresh its log tail, and reload the page when
// what it shows of the job changes (its state, why it waits, its estimate: data-watch).
// A log picked under "Show" (a rank's stdout, say) is followed from its start through the
// API's offset reads (GET /api/v1/jobs/<id>/log/?offset=N: the bytes from N and where to
// ask next), live while the job runs; the page keeps its last MiB. The pick is kept in
// the address (#log=...), so the reload on a change of state shows it again.
(function () {
  "use strict";
  const log = document.getElementById("log");
  if (!log) return;
  const every = 3000;
  const piece = 262144; // bytes asked for at once
  const keep = 1048576; // characters of a followed log kept on the page
  const view = document.getElementById("log-view");
  const picker = document.getElementById("log-source");
  const status = document.getElementById("log-status");
  let following = 0; // which pick is being followed (0: none, the tail)

  function atBottom() { return log.scrollTop + log.clientHeight >= log.scrollHeight - 4; }
  function show(text) {
    const bottom = atBottom();
    log.textContent = text;
    if (bottom) log.scrollTop = log.scrollHeight;
  }
  function wait(ms) { return new Promise(function (done) { window.setTimeout(done, ms); }); }

  async function follow(query, mine) {
    let offset = 0;
    let text = "";
    let cut = false;
    show("");
    while (mine === following) {
      let part;
      try {
        const url = view.dataset.api + "?" + query + "&offset=" + offset + "&max_bytes=" + piece;
        const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (!response.ok) { status.textContent = "cannot read this log now (HTTP " + response.status + "); retrying"; await wait(every); continue; }
        part = await response.json();
      } catch (e) { await wait(every); continue; }
      if (mine !== following) return;
      const grew = part.next_offset > offset;
      if (part.log) {
        text += part.log;
        if (text.length > keep) { text = text.slice(-keep); cut = true; }
        show((cut ? "[… earlier output left out here: download the whole log below]\n" : "") + (text || "(no output yet)"));
      } else if (!text) {
        show("(no output yet)");
      }
      offset = part.next_offset;
      if (part.ended && !grew) { status.textContent = "whole: " + offset + " bytes"; return; }
      status.textContent = (part.ended ? "reading: " : "following: ") + offset + " bytes so far";
      if (part.next_offset - part.offset < piece - 4) await wait(every); // caught up: wait for more
    }
  }

  function pick() {
    following += 1;
    const query = picker.value;
    history.replaceState(null, "", query ? "#log=" + encodeURIComponent(query) : window.location.pathname + window.location.search);
    status.textContent = "";
    if (query) follow(query, following); else refreshTail(true);
  }

  async function refreshTail(once) {
    try {
      const response = await fetch(log.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) {
        const data = await response.json();
        if (!following || !picker.value) show(data.log || "(no output yet)");
        if (log.dataset.live === "1" && (data.state !== log.dataset.state || data.watch !== log.dataset.watch)) { window.location.reload(); return; }
      }
    } catch (e) { /* the next tick retries */ }
    if (!once) window.setTimeout(refreshTail, every);
  }

  if (view && picker) {
    view.hidden = false;
    picker.addEventListener("change", pick);
    const asked = /^#log=(.+)$/.exec(window.location.hash);
    if (asked) {
      const query = decodeURIComponent(asked[1]);
      if (Array.prototype.some.call(picker.options, function (o) { return o.value === query; })) { picker.value = query; pick(); }
    }
  }
  if (log.dataset.live === "1") window.setTimeout(refreshTail, every);
})();
