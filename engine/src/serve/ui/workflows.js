// Cairn web view: the workflows page. Reads /api/view/workflows (each workflow compiled in or
// with threads: versions, nodes, threads by status and version) every 5 s while the tab is
// visible; draws each compiled-in version's graph side by side (/api/workflows/{id}/graph.svg
// ?version=), once; and starts a thread (POST /api/workflows/{id}/threads) from each
// workflow's form, with the tab's token, which the page asks for (never served in it).
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

  /** "k=v, k2=v2" (commas or new lines) as an object, or an Error naming the bad pair. */
  function parseLabels(raw) {
    const out = {};
    for (const pair of raw.split(/[,\n]/).map((p) => p.trim()).filter(Boolean)) {
      const at = pair.indexOf("=");
      if (at <= 0) throw new Error(`label "${pair}" is not key=value`);
      out[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
    }
    return out;
  }

  /** The start form of workflow `w`: input (JSON, checked as it is typed), optional id and
   *  labels, and the version when several are compiled in. */
  function startForm(w) {
    const wf = w.workflow;
    const input = el("textarea", { class: "mono", name: "input", rows: 6, spellcheck: "false", "aria-label": `input of ${wf}` }, "{}");
    const inputNote = el("div", { class: "note" });
    const id = el("input", { name: "id", "aria-label": "thread id", placeholder: "thread id (optional: a new one is made)", autocomplete: "off" });
    const labels = el("input", { name: "labels", "aria-label": "labels", placeholder: "labels: team=a, env=test (optional)", autocomplete: "off" });
    const newest = w.versions[w.versions.length - 1];
    const version = w.versions.length > 1
      ? el("select", { name: "version", "aria-label": "version" }, w.versions.slice().reverse().map((v) => el("option", { value: String(v) }, `v${v}${v === newest ? " (newest)" : ""}`)))
      : null;
    const go = el("button", { class: "b primary", type: "submit" }, "Start");
    const format = el("button", { class: "b", type: "button", title: "pretty-print the input" }, "Format");
    const result = el("div", { class: "start-result", role: "status" });
    const form = el("form", { class: "start", "data-start": wf, novalidate: true },
      el("h3", {}, "Start a thread"),
      el("label", {}, "input (JSON: the workflow's initial state)"), input, inputNote,
      el("div", { class: "row" }, id, version),
      labels,
      el("div", { class: "row" }, go, format, result));

    /** The body, or null with the reason shown by its field. */
    function body() {
      const b = {};
      try {
        b.input = JSON.parse(input.value);
        input.classList.remove("invalid");
        inputNote.className = "note ok";
        inputNote.textContent = "valid JSON";
      } catch (e) {
        input.classList.add("invalid");
        inputNote.className = "note error";
        inputNote.textContent = input.value.trim() ? `not JSON: ${e.message}` : "the input is required (JSON, e.g. {})";
        return null;
      }
      try {
        b.labels = parseLabels(labels.value);
        labels.classList.remove("invalid");
      } catch (e) {
        labels.classList.add("invalid");
        inputNote.className = "note error";
        inputNote.textContent = e.message;
        return null;
      }
      if (id.value.trim()) b.id = id.value.trim();
      if (version) b.version = Number(version.value);
      return b;
    }
    const check = () => { go.disabled = format.disabled = body() === null; };
    format.addEventListener("click", () => { input.value = JSON.stringify(JSON.parse(input.value), null, 2); check(); });
    input.addEventListener("input", check);
    labels.addEventListener("input", check);
    check();

    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const b = body();
      if (!b || !hasToken(result)) return;
      go.disabled = true;
      result.className = "start-result muted";
      result.textContent = "starting…";
      try {
        const r = await cairn.send("POST", `/api/workflows/${encodeURIComponent(wf)}/threads`, b);
        result.className = "start-result";
        result.replaceChildren(r.created ? "started " : "already there: ",
          el("a", { class: "mono", href: `/ui/threads/${encodeURIComponent(r.thread)}`, "data-thread": r.thread }, r.thread));
        refresh();
        check();
      } catch (e) {
        check();
        result.className = "start-result error";
        result.textContent = cairn.failure(e);
        if (/\(input\)$/.test(e.message)) {
          input.classList.add("invalid");
          inputNote.className = "note error";
          inputNote.textContent = `valid JSON, but not a state of ${wf}: see below`;
        }
      }
    });
    return form;
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
    const section = el("section", { class: "card workflow", "data-workflow": w.workflow },
      el("h2", {}, el("a", { href: `/ui/threads?workflow=${encodeURIComponent(w.workflow)}` }, w.workflow)),
      el("div", { class: "workflow-body" },
        el("div", {},
          el("dl", { class: "kv" },
            el("dt", {}, "versions"), versions,
            el("dt", {}, "nodes"), nodes,
            el("dt", {}, "threads"), total,
            el("dt", {}, "by version"), byVersion),
          row),
        !w.compiled ? "" : w.workflow === "cairn.schedule"
          ? el("p", { class: "muted" }, "Schedules start this one (cairn schedule create, the schedules page), not a form.")
          : startForm(w)));
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

  const refresh = cairn.poll(async () => {
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
