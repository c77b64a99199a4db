// Cairn web view: the workflows page. Reads /api/view/workflows (each workflow compiled in or
// with threads: versions, nodes, threads by status and version; the application's first, the
// engine's own after them, shown built-in and folded) every 5 s while the tab is visible; draws
// each compiled-in version's graph side by side, once, at its own size in a box that scrolls
// (/api/workflows/{id}/graph.svg?version=); and gives each workflow a start form (start.js),
// which sends the tab's token, which the page asks for (never served in it). Above them, the
// drain view (/api/versions): unfinished threads per workflow version and per worker build.
"use strict";

(() => {
  const { api, text, el, badge } = cairn;
  const $ = (id) => document.getElementById(id);
  const cards = new Map(); // workflow id -> { card, update(w) }: built once, so a refresh keeps what is typed
  const hasToken = cairn.tokenField("starts");

  function counts(w) {
    const order = Object.entries(w.counts || {}).sort((a, b) => b[1] - a[1]);
    if (!order.length) return el("span", { class: "muted" }, "no thread yet");
    return order.map(([status, n]) => el("a", {
      class: "count", "data-status": status, "data-n": String(n),
      href: `/ui/threads?workflow=${encodeURIComponent(w.workflow)}&status=${status}`,
    }, badge(status), ` ${n} `));
  }

  /** One version's graph, drawn once; `n` is its thread count, kept current. */
  function versionGraph(w, v, newest) {
    const box = el("div", { class: "graph" }, el("p", { class: "empty" }, "loading…"));
    const n = el("span", { class: "muted", "data-version-threads": String(v) });
    const fig = el("figure", { class: "version", "data-version": String(v) },
      el("figcaption", {}, el("b", {}, `v${v}`), newest && w.versions.length > 1 ? el("span", { class: "muted" }, " (newest: starts use it)") : "", " · ", n),
      box);
    text(`/api/workflows/${encodeURIComponent(w.workflow)}/graph.svg?version=${v}`)
      .then((svg) => { box.innerHTML = svg; fig.dispatchEvent(new Event("drawn", { bubbles: true })); })
      .catch((e) => box.replaceChildren(el("p", { class: "error" }, String(e.message || e))));
    return { fig, update: (w2) => { const k = (w2.thread_versions || {})[v] || 0; n.textContent = `${k} thread${k === 1 ? "" : "s"}`; } };
  }

  /** Under each version after the first, the nodes it adds and drops against the one before
   *  (read off the drawn graphs' `g.node[data-node]`). */
  function compareVersions(row) {
    const figs = [...row.querySelectorAll("figure.version")];
    const nodes = (f) => new Set([...f.querySelectorAll("g.node")].map((g) => g.dataset.node));
    if (figs.some((f) => !f.querySelector("svg"))) return;
    figs.forEach((f, i) => {
      if (i === 0) return;
      const before = nodes(figs[i - 1]);
      const now = nodes(f);
      const added = [...now].filter((x) => !before.has(x));
      const dropped = [...before].filter((x) => !now.has(x));
      for (const g of f.querySelectorAll("g.node")) g.classList.toggle("added", added.includes(g.dataset.node));
      f.querySelector(".changes")?.remove();
      f.append(el("p", { class: "changes" },
        !added.length && !dropped.length ? el("span", { class: "muted" }, `same nodes as v${figs[i - 1].dataset.version}`) : "",
        added.length ? el("span", { class: "add" }, `+ ${added.join(", ")} `) : "",
        dropped.length ? el("span", { class: "del" }, `− ${dropped.join(", ")}`) : "",
        added.length || dropped.length ? el("span", { class: "muted" }, ` against v${figs[i - 1].dataset.version}`) : ""));
    });
  }

  function card(w) {
    const versions = el("dd", {});
    const total = el("dd", { class: "counts-inline" });
    const byVersion = el("dd", {});
    const nodes = el("dd", {});
    const graphs = w.versions.map((v) => versionGraph(w, v, v === w.versions[w.versions.length - 1]));
    const row = el("div", { class: "versions" }, graphs.length ? graphs.map((g) => g.fig)
      : el("p", { class: "muted" }, "Not compiled into this engine: no graph, no start."));
    row.addEventListener("drawn", () => compareVersions(row));
    const body = el("div", { class: "workflow-body" },
      el("div", {},
        el("dl", { class: "kv" },
          el("dt", {}, "versions"), versions,
          el("dt", {}, "nodes"), nodes,
          el("dt", {}, "threads"), total,
          el("dt", {}, "by version"), byVersion),
        row),
      !w.compiled ? "" : w.builtin
        ? el("p", { class: "muted" }, w.workflow === "cairn.batch"
          ? "Batches start this one (cairn batch, the threads page), not a form."
          : "Schedules start this one (cairn schedule create, the schedules page), not a form.")
        : cairnStart.form(w, hasToken, () => refresh()));
    const title = el("a", { href: `/ui/threads?workflow=${encodeURIComponent(w.workflow)}` }, w.workflow);
    // The engine's own workflows (schedules run as one) come after the application's, folded.
    const section = w.builtin
      ? el("section", { class: "card workflow builtin", "data-workflow": w.workflow, "data-builtin": "1" },
        el("details", {},
          el("summary", {}, el("h2", {}, title, " ", el("span", { class: "badge" }, "built-in"),
            el("span", { class: "muted" }, w.workflow === "cairn.batch"
              ? " the engine's own: every batch runs as a thread of it"
              : " the engine's own: every schedule runs as a thread of it")), " "),
          body))
      : el("section", { class: "card workflow", "data-workflow": w.workflow }, el("h2", {}, title), body);
    function update(w2) {
      versions.dataset.versions = w2.versions.join(",");
      versions.textContent = w2.versions.length ? w2.versions.map((v) => `v${v}`).join(", ") : "none compiled in";
      nodes.textContent = w2.nodes === null ? "" : `${w2.nodes} in v${w2.versions[w2.versions.length - 1]}`;
      total.dataset.total = String(w2.total);
      total.replaceChildren(w2.total ? `${w2.total} in all · ` : "", ...[].concat(counts(w2)));
      byVersion.textContent = Object.entries(w2.thread_versions || {}).map(([v, n]) => `v${v}: ${n}`).join(", ");
      graphs.forEach((g) => g.update(w2));
    }
    return { section, update };
  }

  /** The drain view: per version and per build, the unfinished threads (0: it can go). */
  function drain(d) {
    const row = (cells) => el("tr", {}, ...cells.map((c) => el("td", {}, c)));
    const head = (cells) => el("tr", {}, ...cells.map((c) => el("th", {}, c)));
    const versions = d.versions.filter((v) => !v.workflow.startsWith("cairn."));
    $("drain").replaceChildren(
      el("h2", {}, "Drain ", el("span", { class: "muted" }, d.build_here ? `this engine: build ${d.build_here}` : "this engine: no build id")),
      el("table", { class: "drain-versions" }, head(["workflow", "version", "unfinished", "here"]),
        ...versions.map((v) => row([v.workflow, `v${v.version}`, String(v.total), v.registered_here ? "yes" : "no"]))),
      el("table", { class: "drain-builds" }, head(["build", "unfinished", "taken here"]),
        ...d.builds.map((b) => {
          const tr = row([b.build ?? "(unpinned)", String(b.total), b.taken_here ? "yes" : "no"]);
          tr.dataset.build = b.build ?? "";
          tr.dataset.total = String(b.total);
          return tr;
        })),
      d.partial ? el("p", { class: "muted" }, "partial: the read stopped at its bound") : "");
  }

  const refresh = cairn.poll(async () => {
    api("/api/versions").then(drain).catch((e) => $("drain").replaceChildren(el("p", { class: "error" }, String(e.message || e))));
    const out = await api("/api/view/workflows");
    const shown = out.workflows.map((w) => {
      let c = cards.get(w.workflow);
      if (!c) {
        c = card(w);
        cards.set(w.workflow, c);
      }
      c.update(w);
      return c.section;
    });
    const box = $("workflows");
    const same = shown.length === box.children.length && shown.every((s, i) => box.children[i] === s);
    if (!same) {
      box.replaceChildren(...(shown.length ? shown
        : [el("p", { class: "empty" }, "No workflow is registered (EngineBuilder::workflow).")]));
    }
    $("total").textContent = `${out.workflows.length}`;
  }, 5000);
})();
