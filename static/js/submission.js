// A submission's page while it is PENDING or RUNNING: poll its progress.json every 2 s and update the
// queue sentence, the stage, the progress bar and the counts in place; once it settles (FINISHED or
// FAILED) load the page once more, which then shows the results and the board's numbers.
(function () {
  "use strict";
  var section = document.getElementById("submission-state");
  if (!section || section.dataset.active !== "1") { return; }
  function text(id, value) {
    var node = document.getElementById(id);
    if (node) { node.textContent = value; }
  }
  function show(s) {
    if (s.status !== section.dataset.status) { window.location.reload(); return false; }
    if (s.status === "PENDING") {
      text("queue-sentence", s.queue ? s.queue.sentence : "");
      text("queue-note", s.note || "");
    } else if (s.status === "RUNNING") {
      var p = s.summary || {};
      var bar = document.getElementById("run-progress");
      if (bar) { bar.max = p.tasks_total || 1; bar.value = p.tasks_done || 0; bar.textContent = p.percent + "%"; }
      text("run-stage", p.stage || "");
      text("run-tasks", p.tasks_total
        ? p.tasks_done + " of " + p.tasks_total + " tasks done" + (p.suite ? " (" + p.suite + ")" : "") : "");
      text("run-requests", p.requests
        ? p.current_task + ": " + p.requests.done + " of " + p.requests.total + " requests answered" : "");
    }
    return s.active;
  }
  function poll() {
    fetch(section.dataset.progressUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (s) { if (show(s)) { setTimeout(poll, 2000); } })
      .catch(function () { setTimeout(poll, 10000); });
  }
  setTimeout(poll, 2000);
})();
