// Asks before a form that destroys something is sent: a form (or its submit button) with
// data-confirm="question" is submitted only if the person says yes. Without JavaScript
// the form is sent as before.
document.addEventListener("submit", (event) => {
  const question = event.submitter?.dataset.confirm || event.target.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
