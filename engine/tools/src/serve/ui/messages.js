// Cairn web view: the messages of a correlation id, as a sequence picture (drawn by the endpoint)
// and a table.
"use strict";

(() => {
  const { api, text, el, time } = cairn;
  const $ = (id) => document.getElementById(id);
  const fromPath = decodeURIComponent(location.pathname.replace(/^\/ui\/messages\/?/, ""));

  async function show(corr) {
    $("corr").textContent = corr;
    document.title = `${corr} · Messages · Cairn`;
    $("error").textContent = "";
    try {
      const enc = encodeURIComponent(corr);
      const [svg, found] = await Promise.all([
        text(`/api/trace/${enc}/sequence.svg`),
        api(`/api/trace/${enc}`),
      ]);
      $("sequence").innerHTML = svg; // the endpoint's own SVG: every text in it is escaped
      const rows = found.messages.map((m) => el("tr", { "data-lsn": m.lsn },
        el("td", {}, m.lsn),
        el("td", {}, el("a", { href: `/ui/threads/${encodeURIComponent(m.thread)}`, class: "mono" }, m.thread), ` #${m.seq}`),
        el("td", {}, m.node),
        el("td", {}, m.role),
        el("td", {}, m.to || ""),
        el("td", {}, typeof m.content === "string" ? m.content : JSON.stringify(m.content)),
        el("td", { class: "muted" }, time(m.at_ms))));
      $("list").replaceChildren(el("table", { class: "grid" },
        el("thead", {}, el("tr", {}, ["lsn", "thread", "node", "role", "to", "content", "at"].map((h) => el("th", {}, h)))),
        el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 7, class: "empty" }, "No message carries this id.")))));
      document.body.dataset.loaded = "1";
    } catch (e) {
      $("error").textContent = String(e.message || e);
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
