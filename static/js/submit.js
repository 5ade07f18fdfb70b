// The submit form's text must fit in one request (DATA_UPLOAD_MAX_MEMORY_SIZE, the form's
// data-max-bytes): over it, the server can only refuse the whole body (413) and what was
// typed would be lost. So the form checks before it is sent and says, under the largest
// field, how big it is and where big data goes; nothing is sent. Files ride apart
// (uploads do not count); without JavaScript the server's 413 page still says the limit.
document.addEventListener("submit", (event) => {
  const form = event.target;
  const limit = Number(form.dataset.maxBytes || 0);
  if (!limit || form.id !== "submit-form") return;
  const encoder = new TextEncoder();
  let total = 0;
  let largest = null;
  for (const field of form.querySelectorAll("textarea, input:not([type=file])")) {
    const size = encoder.encode(field.name).length + encoder.encode(field.value).length;
    total += size;
    if (!largest || size > largest.size) largest = { field, size };
  }
  if (total <= limit) return;
  event.preventDefault();
  const box = largest.field.closest(".field") || largest.field.parentElement;
  box.classList.add("has-errors");
  let message = box.querySelector(".errorlist.too-large");
  if (!message) {
    message = document.createElement("ul");
    message.className = "errorlist too-large";
    box.appendChild(message);
  }
  const mb = (bytes) => (bytes / 1e6).toFixed(1) + " MB";
  message.innerHTML = "";
  const line = document.createElement("li");
  line.textContent =
    `The form's text is ${mb(total)}, most of it here; a submission may carry at most ${mb(limit)}. ` +
    "Attach big text as Files, or read data from the cluster's storage.";
  message.appendChild(line);
  box.scrollIntoView({ block: "center" });
});
