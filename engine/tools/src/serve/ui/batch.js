// Cairn web view: a batch operation over the threads the threads page's filters match, or
// over the rows ticked in its list (docs/batches.md). Count is a dry run of POST /api/batches; Apply (enabled by a count of the
// same operation and filters) makes the batch and follows GET /api/batches/{id} to its end.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const needsToken = cairn.tokenField("batches");
  const out = $("batch-result");

  function say(text, error) {
    out.className = error ? "error" : "muted";
    out.textContent = text;
  }

  /** The rows ticked in the list (threads.js tells each change). */
  let picked = [];
  document.addEventListener("cairn-selected", (e) => {
    picked = e.detail;
    $("batch-selected").textContent = `the selected rows (${picked.length})`;
    forget();
  });

  /** A datetime-local field's time in ms since the epoch, or undefined when empty. */
  function ms(id) {
    const v = $(id).value;
    return v ? new Date(v).getTime() : undefined;
  }

  /** The batch filter of the page's filters (the search box is not part of it), the form's
   *  version and creation times, and the ticked rows when the scope is "selected". */
  function filter() {
    const f = {};
    if ($("batch-version").value) f.version = Number($("batch-version").value);
    if (ms("batch-from") !== undefined) f.created_from_ms = ms("batch-from");
    if (ms("batch-until") !== undefined) f.created_to_ms = ms("batch-until");
    if ($("batch-scope").value === "selected") {
      if (!picked.length) throw new Error("no row is selected: tick the threads in the list");
      f.ids = [...picked];
    }
    if ($("status").value) f.status = $("status").value;
    if ($("workflow").value) f.workflow = $("workflow").value;
    const labels = {};
    for (const pair of $("label").value.split(",")) {
      const at = pair.indexOf("=");
      if (at > 0) labels[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
    }
    if (Object.keys(labels).length) f.labels = labels;
    return f;
  }

  /** The request's body; throws on a signal value that is not JSON. */
  function body(dryRun) {
    const op = $("batch-op").value;
    const b = { op, filter: filter(), dry_run: dryRun };
    if (op === "cancel") b.reason = $("batch-reason").value.trim() || "batch from the web view";
    if (op === "signal") {
      b.name = $("batch-name").value.trim();
      const v = $("batch-value").value.trim();
      try { b.value = v ? JSON.parse(v) : null; } catch (e) { throw new Error(`the signal value is not JSON: ${e.message}`); }
    }
    if (op === "repin") {
      const build = $("batch-build").value.trim();
      if (build) b.build = build; else b.unpin = true;
    }
    if (op === "migrate" && $("batch-to-version").value) b.to_version = Number($("batch-to-version").value);
    if (op === "reset") b.to = $("batch-to").value.trim() || "start";
    return b;
  }

  function progress(b) {
    const state = b.finished ? "finished" : "running";
    return `batch ${b.id} (${b.op}): ${state}, ${b.done} of ${b.total} done: ${b.applied} applied, ${b.skipped} skipped`;
  }

  /** Follows batch `id` until it finishes, every half second. */
  async function follow(id) {
    for (;;) {
      const b = await cairn.api(`/api/batches/${encodeURIComponent(id)}`);
      say(progress(b));
      out.dataset.finished = b.finished ? "1" : "";
      if (b.finished) return;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  let counted = null;
  function forget() { counted = null; $("batch-apply").disabled = true; }
  for (const id of ["filters", "batch"]) {
    $(id).addEventListener("input", forget);
    $(id).addEventListener("change", forget);
  }

  $("batch-count").addEventListener("click", async () => {
    if (!needsToken(out)) return;
    try {
      const b = body(true);
      const answer = await cairn.send("POST", "/api/batches", b);
      counted = JSON.stringify(body(false));
      say(`${answer.total} threads match: ${answer.op} would apply to them (a dry run: nothing applied)`);
      out.dataset.count = String(answer.total);
      $("batch-apply").disabled = answer.total === 0;
    } catch (e) {
      forget();
      say(cairn.failure(e), true);
    }
  });

  $("batch-apply").addEventListener("click", async () => {
    if (!needsToken(out) || counted === null) return;
    $("batch-apply").disabled = true;
    try {
      const made = await cairn.send("POST", "/api/batches", JSON.parse(counted));
      counted = null;
      say(progress(made));
      await follow(made.id);
    } catch (e) {
      say(cairn.failure(e), true);
    }
  });
})();
