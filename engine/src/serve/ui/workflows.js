// Cairn web view: the workflows page. Reads /api/view/workflows (each workflow compiled in or
// with threads: versions, nodes, threads by status and version) and draws each compiled-in
// workflow's graph (/api/workflows/{id}/graph.svg); refreshes the counts every 5 s while the
// tab is visible.
"use strict";

(() => {
  const { api, text, el, badge, setLive } = cairn;
  const $ = (id) => document.getElementById(id);
  const drawn = new Map(); // workflow id -> its graph's element, drawn once

  function counts(w) {
    const order = Object.entries(w.counts || {}).sort((a, b) => b[1] - a[1]);
    if (!order.length) return el("span", { class: "muted" }, "no thread yet");
    return order.map(([status, n]) => el("a", {
      class: "count", "data-status": status, "data-n": String(n),
      href: `/ui/threads?workflow=${encodeURIComponent(w.workflow)}&status=${status}`,
    }, badge(status), ` ${n} `));
  }

  function graph(w) {
    if (!w.compiled) return el("p", { class: "muted" }, "Not compiled into this engine: no graph.");
    let box = drawn.get(w.workflow);
    if (!box) {
      box = el("div", { class: "graph" }, el("p", { class: "empty" }, "loading…"));
      drawn.set(w.workflow, box);
      text(`/api/workflows/${encodeURIComponent(w.workflow)}/graph.svg`)
        .then((svg) => { box.innerHTML = svg; })
        .catch((e) => box.replaceChildren(el("p", { class: "error" }, String(e.message || e))));
    }
    return box;
  }

  function card(w) {
    const versions = w.versions.length ? w.versions.map((v) => `v${v}`).join(", ") : "none compiled in";
    const byVersion = Object.entries(w.thread_versions || {}).map(([v, n]) => `v${v}: ${n}`).join(", ");
    return el("section", { class: "card workflow", "data-workflow": w.workflow },
      el("h2", {}, el("a", { href: `/ui/threads?workflow=${encodeURIComponent(w.workflow)}` }, w.workflow)),
      el("dl", { class: "kv" },
        el("dt", {}, "versions"), el("dd", { "data-versions": w.versions.join(",") }, versions),
        el("dt", {}, "nodes"), el("dd", {}, w.nodes === null ? "" : String(w.nodes)),
        el("dt", {}, "threads"), el("dd", { class: "counts-inline", "data-total": String(w.total) }, `${w.total} `, counts(w)),
        el("dt", {}, "by version"), el("dd", {}, byVersion || "")),
      graph(w));
  }

  let inflight = false;
  async function refresh() {
    if (inflight) return;
    inflight = true;
    try {
      const out = await api("/api/view/workflows");
      const cards = out.workflows.map(card);
      $("workflows").replaceChildren(...(cards.length ? cards
        : [el("p", { class: "empty" }, "No workflow is registered (EngineBuilder::workflow).")]));
      $("total").textContent = `${out.workflows.length}`;
      $("error").textContent = "";
      setLive(true, "live");
      document.body.dataset.loaded = "1";
    } catch (e) {
      $("error").textContent = String(e.message || e);
      setLive(false, "disconnected");
    } finally {
      inflight = false;
    }
  }

  refresh();
  setInterval(() => { if (document.visibilityState === "visible") refresh(); }, 5000);
})();
