// Cairn web view: the queues page. Reads /api/queues (each queue's limits and its running and
// waiting threads, in all and per key, and the admissions in its rate window); refreshes every
// 2 s while the tab is visible.
"use strict";

(() => {
  const { api, el } = cairn;
  const $ = (id) => document.getElementById(id);

  /** "n / max" with a bar, or "n" when there is no limit. */
  function used(n, max) {
    if (max === null || max === undefined) return el("span", {}, String(n), el("span", { class: "muted" }, " (no limit)"));
    const pct = Math.max(0, Math.min(100, Math.round((100 * n) / max)));
    return el("span", { class: n >= max ? "full" : "" },
      el("span", { class: `progress${n >= max ? " over" : ""}` }, el("span", { style: `width:${pct}%` })),
      `${n} / ${max}`);
  }

  function period(ms) {
    if (ms % 3600000 === 0) return `${ms / 3600000} h`;
    if (ms % 60000 === 0) return `${ms / 60000} min`;
    if (ms % 1000 === 0) return `${ms / 1000} s`;
    return `${ms} ms`;
  }

  function card(q, nowMs) {
    const lim = q.limits || {};
    const rate = lim.rate;
    // An admission at t counts against the rate until t + period_ms.
    const inWindow = rate ? (q.recent || []).filter((t) => t + rate.period_ms > nowMs).length : 0;
    const keys = Object.entries(q.keys || {}).sort((a, b) => a[0].localeCompare(b[0]));
    const keyRows = keys.map(([k, c]) => el("tr", { "data-key": k },
      el("td", { class: "mono" }, k === "" ? el("span", { class: "muted" }, "(no key)") : k),
      el("td", { "data-n": "running" }, used(c.running, lim.per_key_max)),
      el("td", { "data-n": "waiting" }, String(c.waiting)),
      el("td", { class: "muted" }, c.served_at ? `#${c.served_at}` : "not yet")));
    return el("section", { class: "card queue", "data-queue": q.name },
      el("h2", {}, q.name),
      el("dl", { class: "kv" },
        el("dt", {}, "running"), el("dd", { "data-n": "running" }, used(q.running, lim.concurrency_max)),
        el("dt", {}, "waiting"), el("dd", { "data-n": "waiting" },
          q.waiting ? el("a", { href: "/ui/threads?status=queued" }, String(q.waiting)) : "0"),
        el("dt", {}, "per key"), el("dd", {}, lim.per_key_max ? `at most ${lim.per_key_max} running` : "no limit"),
        el("dt", {}, "rate"), el("dd", { "data-n": "rate" },
          rate ? el("span", {}, used(inWindow, rate.starts), el("span", { class: "muted" }, ` starts in the last ${period(rate.period_ms)}`)) : "no limit"),
        el("dt", {}, "admitted"), el("dd", {}, `${q.admitted} in all`)),
      el("table", { class: "grid keys" },
        el("thead", {}, el("tr", {}, ["key", "running", "waiting", "last served"].map((h) => el("th", {}, h)))),
        el("tbody", {}, keyRows.length ? keyRows
          : el("tr", {}, el("td", { colspan: 4, class: "empty" }, "No key has a thread waiting or running.")))));
  }

  cairn.poll(async () => {
    const out = await api("/api/queues");
    const cards = out.queues.map((q) => card(q, out.now_ms));
    $("queues").replaceChildren(...(cards.length ? cards
      : [el("p", { class: "empty" }, "No queue is defined (EngineBuilder::queue, cairn queue define).")]));
    $("total").textContent = `${out.queues.length}`;
  }, 2000);
})();
