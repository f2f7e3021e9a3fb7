// "My submissions": poll each PENDING/RUNNING submission's status every 2 s until it settles.
(function () {
  "use strict";
  function poll(row) {
    fetch(row.dataset.statusUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (s) {
        row.querySelector(".status").textContent = s.status;
        var p = s.progress || {};
        var r = p.requests && p.requests.total ? ": " + p.requests.done + " / " + p.requests.total + " requests" : "";
        row.querySelector(".progress").textContent = (s.note ? s.note + " " : "") + (p.tasks_total
          ? p.tasks_done + " / " + p.tasks_total + " tasks" + (p.current_task ? " (running " + p.current_task + r + ")" : "")
          : "");
        var failure = row.nextElementSibling;
        failure.hidden = s.status !== "FAILED";
        failure.querySelector(".reason").textContent = s.failure_reason;
        failure.querySelector(".log-tail").textContent = s.log_tail;
        if (s.active) { setTimeout(function () { poll(row); }, 2000); }
      })
      .catch(function () { setTimeout(function () { poll(row); }, 10000); });
  }
  document.querySelectorAll("tr.submission[data-active='1']").forEach(function (row) {
    setTimeout(function () { poll(row); }, 2000);
  });
})();
