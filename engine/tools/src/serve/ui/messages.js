// Cairn web view: the messages of a correlation id, as a sequence picture (drawn by the endpoint)
// and a table; a message with an id opens the chain of parents to it, each step with the state
// of its thread right after it (`GET /api/trace?chain=ID&states=1`).
"use strict";

(() => {
  const { api, text, el, time } = cairn;
  const $ = (id) => document.getElementById(id);
  const fromPath = decodeURIComponent(location.pathname.replace(/^\/ui\/messages\/?/, ""));
  /** The threads a trace may name at most (the endpoint's bound): past it, every thread. */
  const THREADS_MAX = 100;
  const content = (c) => (typeof c === "string" ? c : JSON.stringify(c));

  async function show(corr) {
    $("corr").textContent = corr;
    document.title = `${corr} · Messages · Cairn`;
    $("error").textContent = "";
    $("chain-card").hidden = true;
    try {
      const enc = encodeURIComponent(corr);
      const [svg, found] = await Promise.all([
        text(`/api/trace/${enc}/sequence.svg`),
        api(`/api/trace/${enc}`),
      ]);
      $("sequence").innerHTML = svg; // the endpoint's own SVG: every text in it is escaped
      const threads = [...new Set(found.messages.map((m) => m.thread))];
      const rows = found.messages.map((m) => el("tr", { "data-lsn": m.lsn, "data-id": m.id },
        el("td", {}, m.lsn),
        el("td", {}, el("a", { href: `/ui/threads/${encodeURIComponent(m.thread)}`, class: "mono" }, m.thread), ` #${m.seq}`),
        el("td", {}, m.node),
        el("td", {}, m.role),
        el("td", {}, m.to || ""),
        el("td", {}, content(m.content)),
        el("td", { class: "muted" }, time(m.at_ms)),
        el("td", {}, m.id ? el("button", {
          class: "b chain", type: "button", title: "the messages that led here, with the state after each",
          onclick: () => chain(m.id, threads),
        }, "chain") : "")));
      $("list").replaceChildren(el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["lsn", "thread", "node", "role", "to", "content", "at", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No message carries this id.")))));
      document.body.dataset.loaded = "1";
    } catch (e) {
      $("error").textContent = String(e.message || e);
    }
  }

  /** The chain of parents ending at message `id`, read in the threads the page's messages are in. */
  async function chain(id, threads) {
    const q = new URLSearchParams({ chain: id, states: "1" });
    if (threads.length <= THREADS_MAX) threads.forEach((t) => q.append("thread", t));
    for (const tr of document.querySelectorAll("#list tr[data-id]")) tr.classList.toggle("selected", tr.dataset.id === id);
    $("chain-to").textContent = id;
    $("chain-card").hidden = false;
    $("chain").replaceChildren(el("p", { class: "muted" }, "Reading…"));
    try {
      const found = await api(`/api/trace?${q}`);
      const steps = found.steps.map((s, n) => {
        const m = s.message, st = s.state;
        return el("li", { class: "chain-step", "data-id": m.message.id || "", "data-thread": m.thread },
          el("div", {},
            el("b", {}, `${n + 1}. `),
            el("a", { href: `/ui/threads/${encodeURIComponent(m.thread)}`, class: "mono" }, m.thread), ` #${m.seq} · `,
            el("span", { class: "mono" }, m.message.id || ""), " ",
            `${m.message.role}${m.message.to ? ` → ${m.message.to}` : ""}: ${content(m.message.content)}`),
          el("div", { class: "muted" }, `state of ${st.thread} after seq ${st.seq} (step ${st.step}, ${st.status})`),
          el("pre", { class: "json" }, JSON.stringify(st.state, null, 2)));
      });
      $("chain").replaceChildren(steps.length ? el("ol", { class: "chain-steps" }, steps)
        : el("p", { class: "empty" }, "No message of the chain was found."));
      document.body.dataset.chain = id;
    } catch (e) {
      $("chain").replaceChildren(el("p", { class: "error" }, String(e.message || e)));
    }
  }

  $("find").addEventListener("submit", (e) => {
    e.preventDefault();
    const corr = $("id").value.trim();
    if (!corr) return;
    history.pushState(null, "", `/ui/messages/${encodeURIComponent(corr)}`);
    show(corr);
  });
  if (fromPath) { $("id").value = fromPath; show(fromPath); }
})();
