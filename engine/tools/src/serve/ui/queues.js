// Cairn web view: the queues page. Reads /api/queues (each queue's limits and flow control, its
// running and waiting threads, in all and per key, the admissions in its rate window, and the
// starts waiting for a quiet period or a batch); refreshes every
// 2 s while the tab is visible, drawing each queue's depth over the samples this tab took.
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

  /** A time still to run or already run, rounded to what a person reads (s under 2 min). */
  function span(ms) {
    if (ms < 1000) return `${ms} ms`;
    if (ms < 120000) return `${Math.round(ms / 1000)} s`;
    if (ms < 7200000) return `${Math.round(ms / 60000)} min`;
    return `${Math.round(ms / 3600000)} h`;
  }

  // Each queue's depth over the last samples this tab took (one a refresh), newest last.
  const SAMPLES = 60;
  const history = new Map();

  /** A small picture of a queue's running (blue) and waiting (amber) counts over its samples. */
  function sparkline(samples) {
    const W = 180, H = 34;
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    svg.setAttribute("class", "spark");
    svg.setAttribute("role", "img");
    const top = Math.max(1, ...samples.map((p) => Math.max(p.running, p.waiting)));
    // Left to right as samples come (at least 10 wide, so the first ones show), then scrolls.
    const span = Math.max(samples.length, 10) - 1;
    const x = (i) => 1 + (W - 2) * i / span;
    const y = (n) => H - 3 - (H - 6) * n / top;
    for (const [key, cls] of [["waiting", "waiting"], ["running", "running"]]) {
      const line = document.createElementNS(NS, "polyline");
      line.setAttribute("points", samples.map((p, i) => `${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" "));
      line.setAttribute("class", cls);
      svg.append(line);
    }
    const last = samples[samples.length - 1];
    svg.setAttribute("aria-label", `running ${last.running}, waiting ${last.waiting}; highest ${top} over the last ${samples.length} samples`);
    return svg;
  }

  function record(q) {
    const samples = history.get(q.name) || [];
    samples.push({ running: q.running, waiting: q.waiting });
    if (samples.length > SAMPLES) samples.shift();
    history.set(q.name, samples);
    return samples;
  }

  /** A queue's flow control in words (rate per key, dropping, debounce, batching, fairness
   * weights). */
  function flow(lim) {
    const parts = [];
    if (lim.rate_per_key) parts.push(`${lim.rate_per_key.starts} starts per key in ${period(lim.rate_per_key.period_ms)}`);
    if (lim.rate_drops) parts.push("a start over a rate is refused");
    if (lim.debounce_ms) parts.push(`debounced: a key's last start runs after ${period(lim.debounce_ms)} quiet`);
    if (lim.batch_max || lim.batch_window_ms) {
      const by = [lim.batch_max ? `${lim.batch_max} waiting` : null,
        lim.batch_window_ms ? `${period(lim.batch_window_ms)} after the first` : null].filter(Boolean);
      parts.push(`batched: one run per key once ${by.join(" or ")}`);
    }
    const fair = lim.fairness;
    const others = fair ? Math.max(1, fair.default_weight || 1) : 1;
    const weights = fair ? Object.entries(fair.weights || {}) : [];
    // Weights that are all the same admit keys round robin, as none do.
    if (weights.some(([, w]) => w !== others)) {
      parts.push(`weighted: ${weights.map(([k, w]) => `${k} ${w}`).join(", ")}, other keys ${others}`);
    }
    return parts.length ? parts.join("; ") : "none";
  }

  /** The starts waiting for a quiet period or a batch, per key. */
  function held(q, nowMs) {
    const link = (t) => el("a", { class: "mono", href: `/ui/threads/${encodeURIComponent(t)}` }, t);
    const rows = [];
    for (const [k, d] of Object.entries(q.debounced || {})) {
      rows.push(el("tr", { "data-held": "debounced" }, el("td", { class: "mono" }, k || "(no key)"),
        el("td", {}, link(d.thread)),
        el("td", { class: "muted" }, d.due_ms > nowMs ? `quiet for ${span(d.due_ms - nowMs)} more` : "due")));
    }
    for (const [k, b] of Object.entries(q.batching || {})) {
      rows.push(el("tr", { "data-held": "batching" }, el("td", { class: "mono" }, k || "(no key)"),
        el("td", {}, ...b.members.slice(0, 8).flatMap((t, i) => i ? [", ", link(t)] : [link(t)]),
          b.members.length > 8 ? el("span", { class: "muted" }, ` and ${b.members.length - 8} more`) : ""),
        el("td", { class: "muted" }, `${b.members.length} gathering since ${span(Math.max(0, nowMs - b.since_ms))} ago`)));
    }
    if (!rows.length) return null;
    return el("table", { class: "grid held" },
      el("thead", {}, el("tr", {}, ["key", "waiting start(s)", "until"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows));
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
        el("dt", {}, "flow control"), el("dd", { "data-n": "flow" }, flow(lim)),
        el("dt", {}, "admitted"), el("dd", {}, `${q.admitted} in all`),
        el("dt", {}, "depth"), el("dd", { "data-n": "depth", "data-samples": String(record(q).length) },
          sparkline(history.get(q.name)), el("span", { class: "legend-inline" },
            el("span", { class: "running" }, "running"), " ", el("span", { class: "waiting" }, "waiting"),
            el("span", { class: "muted" }, ` · the last ${history.get(q.name).length} of ${SAMPLES} samples, one every 2 s`)))),
      held(q, nowMs) || "",
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
