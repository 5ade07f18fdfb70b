// Interactive apps: each session card that has not ended fetches itself again every few
// seconds (the server asks its readiness then), so Connect shows once the app answers.
(function () {
  "use strict";
  const every = 3000;
  async function refresh(card) {
    try {
      const response = await fetch(card.dataset.url, { credentials: "same-origin" });
      if (response.ok) {
        const holder = document.createElement("div");
        holder.innerHTML = (await response.text()).trim();
        const fresh = holder.querySelector(".session-card");
        if (fresh) { card.replaceWith(fresh); card = fresh; }
      }
    } catch (e) { /* the next round retries */ }
    if (card.dataset.phase !== "ended") window.setTimeout(() => refresh(card), every);
  }
  document.querySelectorAll(".session-card").forEach((card) => {
    if (card.dataset.phase !== "ended") window.setTimeout(() => refresh(card), every);
  });
})();
