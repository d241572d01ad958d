// The run page of a pending or running run polls its progress (runs/views.py run_progress_view)
// and swaps in the rows that changed, the counts and the progress bar: no page reload. When the
// run finishes it stops and offers the report (rendered with the finished page).
(function () {
  "use strict";
  const box = document.querySelector(".live-progress");
  if (!box) return;
  const url = box.dataset.url;
  const bar = box.querySelector(".progress-bar");
  const POLL_MS = 2000;
  let rows = {};

  function apply(data) {
    const percent = data.total ? Math.round((100 * data.settled) / data.total) : 100;
    bar.querySelector("span").style.width = percent + "%";
    bar.setAttribute("aria-valuenow", String(data.settled));
    box.querySelector(".settled").textContent = String(data.settled);
    box.querySelector(".total").textContent = String(data.total);
    for (const [classification, count] of Object.entries(data.counts)) {
      const cell = document.querySelector('[data-count="' + classification + '"]');
      if (cell) cell.textContent = String(count);
    }
    for (const [pk, html] of Object.entries(data.rows)) {
      if (rows[pk] === html) continue;
      const row = document.getElementById("execution-" + pk);
      if (row) row.outerHTML = html;
      rows[pk] = html;
    }
    const status = document.querySelector(".run-status");
    if (status) {
      status.textContent = data.statusLabel;
      status.className = "status status-" + data.status + " run-status";
    }
    // Queued executions and no worker alive (runs/queries.py waiting_for_a_worker): say so, and
    // take it back as soon as a worker starts.
    const noWorker = box.querySelector(".no-worker");
    if (noWorker) {
      noWorker.hidden = !data.waitingForWorker;
      noWorker.querySelector(".waiting").textContent = String(data.waitingForWorker || 0);
    }
    const state = box.querySelector(".state");
    if (data.finished) {
      state.textContent = "the run is " + data.statusLabel + ": ";
      const link = document.createElement("a");
      link.href = window.location.pathname;
      link.textContent = "show its report";
      state.appendChild(link);
      box.classList.add("done");
    }
    return data.finished;
  }

  // An answer that polling again cannot change: said once, and the polling stops.
  class Final extends Error {}

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((response) => {
        // The run was deleted (pruned) since the page was opened: retrying would say "the server
        // did not answer" for ever.
        if (response.status === 404) throw new Final("this run no longer exists (it was deleted since the page was opened)");
        // Signed out (the session expired): login_required answers with the sign-in page.
        const type = response.headers.get("Content-Type") || "";
        if (response.redirected || (response.ok && !type.includes("application/json"))) {
          throw new Final("updates stopped: you are signed out; reload the page to sign in again");
        }
        if (!response.ok) throw new Error("progress answered " + response.status);
        return response.json();
      })
      .then((data) => {
        if (!apply(data)) window.setTimeout(poll, POLL_MS);
      })
      .catch((error) => {
        const state = box.querySelector(".state");
        if (error instanceof Final) {
          state.textContent = error.message;
          const noWorker = box.querySelector(".no-worker");
          if (noWorker) noWorker.hidden = true;
          return;
        }
        state.textContent = "updates paused (the server did not answer); retrying";
        window.setTimeout(poll, POLL_MS * 3);
      });
  }
  window.setTimeout(poll, POLL_MS);
})();
