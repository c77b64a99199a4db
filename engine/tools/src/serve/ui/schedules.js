// Cairn web view: the schedules page. Reads /api/schedules (each schedule: spec with its overlap
// policy and jitter, status, next ticks, last runs, threads started by its ticks and its Run
// now) every 2 s while the tab is visible; its buttons send the schedule controls (POST /api/schedules/{name}/pause|resume|
// trigger, DELETE /api/schedules/{name}) with the tab's token, which the page asks for (never
// served in it).
"use strict";

(() => {
  const { api, el, badge, time, age } = cairn;
  const $ = (id) => document.getElementById(id);
  // A schedule's status is its thread's, but `deleted` once deleted (its thread cancelled).
  const ENDED = new Set(["deleted", "cancelled", "completed", "failed", "timed_out"]);

  function every(spec) {
    const e = spec.every || {};
    if (e.cron) return `cron ${e.cron.expr} (${e.cron.tz})`;
    if (e.interval) return `every ${cairn.duration(e.interval.ms)}`;
    return JSON.stringify(e);
  }

  // What a tick does while the run it started before still runs (`--overlap`).
  const OVERLAP = {
    allow_all: "starts anyway",
    skip: "is skipped",
    buffer_one: "waits for it (one kept)",
    cancel_other: "cancels it",
  };

  /** A schedule's overlap policy and jitter, under its rule. */
  function policy(spec) {
    const overlap = spec.overlap || "allow_all";
    return [
      el("div", { class: "muted", "data-n": "overlap", title: `overlap policy ${overlap}` },
        `overlap ${overlap}: a tick while a run runs ${OVERLAP[overlap] || ""}`),
      spec.jitter_ms ? el("div", { class: "muted", "data-n": "jitter" }, `jitter: each tick up to ${cairn.duration(spec.jitter_ms)} late`) : "",
    ];
  }

  const hasToken = cairn.tokenField("the buttons");

  async function act(name, control) {
    const out = $("control-result");
    if (!hasToken(out)) return;
    if (control === "delete" && !confirm(`Delete schedule ${name}? It starts nothing more.`)) return;
    out.className = "muted";
    out.textContent = `${control} ${name}…`;
    const path = `/api/schedules/${encodeURIComponent(name)}`;
    try {
      const r = control === "delete" ? await cairn.send("DELETE", path) : await cairn.send("POST", `${path}/${control}`);
      out.className = "";
      if (r.thread) {
        out.replaceChildren(`${control} ${name}: started `, el("a", { href: `/ui/threads/${encodeURIComponent(r.thread)}` }, r.thread));
      } else {
        out.textContent = `${control} ${name}: ${r.status}`;
      }
      await refresh();
    } catch (e) {
      out.className = "error";
      out.textContent = cairn.failure(e);
    }
  }

  function row(s, nowMs) {
    const ended = ENDED.has(s.status);
    const button = (control, label, shown, cls) => shown
      ? el("button", { class: `b${cls ? ` ${cls}` : ""}`, type: "button", "data-control": control, onclick: () => act(s.name, control) }, label) : "";
    const paused = s.status === "paused";
    const ticks = s.next_ticks.length
      ? [el("ol", { class: `ticks${paused ? " paused" : ""}` }, s.next_ticks.map((t) => el("li", { "data-tick": String(t) }, `${time(t).slice(0, 19)} (in ${age(t - nowMs)})`))),
        paused ? el("div", { class: "muted" }, "none starts while paused") : ""]
      : el("span", { class: "muted" }, ended ? "ended" : "none");
    const runs = s.last_runs.length
      ? el("ol", { class: "ticks" }, s.last_runs.map((r) => el("li", {},
        el("a", { class: "mono", href: `/ui/threads/${encodeURIComponent(r.thread)}` }, r.thread), " ", badge(r.status))))
      : el("span", { class: "muted" }, "none yet");
    return el("tr", { "data-schedule": s.name, "data-status": s.status },
      el("td", { class: "mono" }, el("a", { href: `/ui/threads/${encodeURIComponent(s.thread)}`, title: s.thread }, s.name)),
      el("td", {}, badge(s.status)),
      el("td", {}, el("a", { href: `/ui/threads?workflow=${encodeURIComponent(s.workflow)}` }, s.workflow)),
      el("td", { class: "nowrap" }, every(s.spec), s.spec.end_ms ? el("div", { class: "muted" }, `until ${time(s.spec.end_ms)}`) : "",
        ...policy(s.spec)),
      el("td", {}, ticks),
      el("td", {}, runs),
      el("td", { class: "muted nowrap" },
        el("div", { "data-started": String(s.started) }, `${s.started} started`, s.triggered ? ` (${s.triggered} by Run now)` : ""),
        el("div", {}, `${s.skipped} skipped`)),
      el("td", {}, el("div", { class: "schedule-actions" },
        button("pause", "Pause", !ended && s.status !== "paused"),
        button("resume", "Resume", s.status === "paused"),
        button("trigger", "Run now", !ended),
        button("delete", "Delete", !ended, "danger"))));
  }

  const refresh = cairn.poll(async () => {
    const out = await api("/api/schedules");
    const rows = out.schedules.map((s) => row(s, out.now_ms));
    $("schedules").tBodies[0].replaceChildren(...(rows.length ? rows
      : [el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No schedule (Engine::create_schedule, cairn schedule create)."))]));
    $("total").textContent = `${out.schedules.length}`;
  }, 2000);
})();
