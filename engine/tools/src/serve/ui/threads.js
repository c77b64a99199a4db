// Cairn web view: the threads page. Reads /api/view/threads (one page, the total and counts by
// status); refreshes every 2 s while the tab is visible; the filters live in the address.
"use strict";

(() => {
  const { api, el, badge, age, progressBar, labels } = cairn;
  const STATUSES = ["queued", "created", "running", "paused", "waiting_input", "sleeping", "blocked",
    "completed", "failed", "cancelled", "timed_out"];
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const state = {
    q: params.get("q") || "",
    status: params.get("status") || "",
    workflow: params.get("workflow") || "",
    label: params.get("label") || "",
    limit: Number(params.get("limit")) || 50,
    offset: Number(params.get("offset")) || 0,
  };
  let total = 0;

  for (const s of STATUSES) $("status").append(el("option", { value: s }, s.replace("_", " ")));
  $("q").value = state.q;
  $("status").value = state.status;
  $("label").value = state.label;
  $("limit").value = String(state.limit);

  function query() {
    const p = new URLSearchParams();
    if (state.q) p.set("q", state.q);
    if (state.status) p.set("status", state.status);
    if (state.workflow) p.set("workflow", state.workflow);
    if (state.label.includes("=")) p.set("label", state.label);
    p.set("limit", String(state.limit));
    p.set("offset", String(state.offset));
    return p;
  }

  function remember() {
    const p = query();
    if (p.get("offset") === "0") p.delete("offset");
    if (p.get("limit") === "50") p.delete("limit");
    const s = p.toString();
    history.replaceState(null, "", s ? `?${s}` : location.pathname);
  }

  function renderCounts(counts) {
    const box = $("counts");
    box.replaceChildren();
    const all = Object.values(counts).reduce((a, b) => a + b, 0);
    const chip = (key, label, n) => el("button", {
      type: "button", class: state.status === key ? "active" : "", "data-status": key || "all",
      onclick: () => { state.status = key; $("status").value = key; state.offset = 0; refresh(); },
    }, el("span", { class: "n" }, n), el("span", { class: "k" }, label));
    box.append(chip("", "all", all));
    for (const s of STATUSES) {
      if (counts[s] || state.status === s || ["running", "completed", "failed"].includes(s)) {
        box.append(chip(s, s.replace("_", " "), counts[s] || 0));
      }
    }
  }

  function renderWorkflows(ids) {
    const sel = $("workflow");
    const known = new Set([...sel.options].map((o) => o.value));
    for (const id of ids) if (!known.has(id)) sel.append(el("option", { value: id }, id));
    if (state.workflow && !known.has(state.workflow) && !ids.includes(state.workflow)) {
      sel.append(el("option", { value: state.workflow }, state.workflow));
    }
    sel.value = state.workflow;
  }

  /** The rows selected for a batch ("apply to the selected"), kept across pages and redraws. */
  const selected = new Set();

  /** The row's checkbox: selects thread `id` for a batch. */
  function pick(id) {
    const box = el("input", { type: "checkbox", class: "pick", value: id, "aria-label": `select ${id}` });
    box.checked = selected.has(id);
    box.addEventListener("change", () => {
      if (box.checked) selected.add(id); else selected.delete(id);
      document.dispatchEvent(new CustomEvent("cairn-selected", { detail: [...selected] }));
    });
    return box;
  }

  function renderRows(rows, now) {
    const body = $("threads").tBodies[0];
    const out = rows.map((t) => el("tr", { "data-thread": t.thread },
      el("td", {}, pick(t.thread)),
      el("td", {}, el("a", { href: `/ui/threads/${encodeURIComponent(t.thread)}`, class: "mono" }, t.thread)),
      el("td", {}, badge(t.status)),
      el("td", {}, t.workflow ? `${t.workflow.id} v${t.workflow.version}` : ""),
      el("td", {}, t.step ?? ""),
      el("td", {}, progressBar(t)),
      el("td", {}, labels(t.labels)),
      el("td", { title: cairn.time(t.created_at_ms) }, age(now - t.created_at_ms)),
      el("td", { title: cairn.time(t.updated_at_ms) }, `${age(now - t.updated_at_ms)} ago`)));
    if (!out.length) out.push(el("tr", {}, el("td", { colspan: 9, class: "empty" }, "No thread matches.")));
    body.replaceChildren(...out);
  }

  function renderPager() {
    const pages = Math.max(1, Math.ceil(total / state.limit));
    const page = Math.floor(state.offset / state.limit) + 1;
    const from = total ? state.offset + 1 : 0;
    const to = Math.min(total, state.offset + state.limit);
    $("pageinfo").textContent = `${from}–${to} of ${total} · page ${page} of ${pages}`;
    $("first").disabled = $("prev").disabled = state.offset === 0;
    $("next").disabled = $("last").disabled = to >= total;
    $("total").textContent = `(${total})`;
  }

  /** Reads the page the filters ask for (the last one when they leave fewer threads than the
   *  offset) and draws it. */
  async function render() {
    remember();
    let page = await api(`/api/view/threads?${query()}`);
    total = page.total;
    if (state.offset >= total && total > 0) {
      state.offset = Math.floor((total - 1) / state.limit) * state.limit;
      page = await api(`/api/view/threads?${query()}`);
      total = page.total;
    }
    renderCounts(page.counts);
    renderWorkflows(page.workflows);
    renderRows(page.threads, page.now_ms);
    renderPager();
  }
  const refresh = cairn.poll(render, 2000);

  let typing;
  $("q").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = $("q").value.trim(); state.offset = 0; refresh(); }, 250);
  });
  $("label").addEventListener("change", () => { state.label = $("label").value.trim(); state.offset = 0; refresh(); });
  $("status").addEventListener("change", () => { state.status = $("status").value; state.offset = 0; refresh(); });
  $("workflow").addEventListener("change", () => { state.workflow = $("workflow").value; state.offset = 0; refresh(); });
  $("limit").addEventListener("change", () => { state.limit = Number($("limit").value); state.offset = 0; refresh(); });
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("clear").addEventListener("click", () => {
    Object.assign(state, { q: "", status: "", workflow: "", label: "", offset: 0 });
    setTimeout(refresh, 0);
  });
  $("first").addEventListener("click", () => { state.offset = 0; refresh(); });
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); refresh(); });
  $("next").addEventListener("click", () => { state.offset += state.limit; refresh(); });
  $("last").addEventListener("click", () => {
    state.offset = Math.max(0, Math.floor((total - 1) / state.limit) * state.limit); refresh();
  });
})();
