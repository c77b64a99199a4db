// Cairn web view: one thread. The log is windowed: the page holds at most MAX_ROWS events, loads
// the last WINDOW first and older ones a window at a time, and follows new ones over SSE. The
// timeline is windowed too: TL_WINDOW events folded by the endpoint, the latest ones (following)
// or any earlier window (Earlier / Later / up to a seq). A sub-workflow's run and graph node link
// to its child thread's page. The
// summary, graph, timeline and checkpoints are read again (at most once a second) when events
// arrive.
"use strict";

(() => {
  const { api, text, el, badge, age, duration, time, progressBar, labels, setLive } = cairn;
  const $ = (id) => document.getElementById(id);
  const WINDOW = 200;
  const TL_WINDOW = 1000;
  const MAX_ROWS = 2000;
  const TERMINAL = new Set(["completed", "failed", "cancelled", "timed_out"]);
  const id = decodeURIComponent(location.pathname.replace(/^\/ui\/threads\//, ""));
  const enc = encodeURIComponent(id);
  document.title = `${id} · Cairn`;
  $("title").textContent = id;
  $("stream-link").href = `/ui/threads/${enc}/stream`;

  let summary = null;
  let rows = []; // events in the page, ascending seq
  let atLatest = true; // the window reaches the newest event read
  let selected = null;
  let source = null;
  let dirty = false;
  let tlTo = null; // the timeline window's last seq; null: the latest (it follows)

  // ---- summary, budgets, last error ----
  function kv(dl, pairs) {
    dl.replaceChildren(...pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
      .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function renderSummary(s) {
    summary = s;
    $("status").replaceChildren(badge(s.status));
    document.body.dataset.status = s.status;
    const wf = s.workflow ? `${s.workflow.id} v${s.workflow.version}` : "";
    $("subtitle").textContent = `${wf} · step ${s.step} · seq ${s.seq}`;
    const waiting = s.waiting ? cairn.orSealed(s.waiting, waitingText) : "";
    const link = (id, v) => (v ? cairn.orSealed(v, (t) => el("a", { id, href: `/ui/threads/${encodeURIComponent(t)}` }, t)) : "");
    // A sub-workflow's parent is the "sub-workflow of" row; a fork's, or the thread whose node
    // started this one (`ctx.start_child`), the "parent" row.
    const parent = s.parent && s.parent.via !== "sub-workflow" ? el("a", { href: `/ui/threads/${encodeURIComponent(s.parent.thread)}` },
      s.parent.seq == null ? `${s.parent.thread} (started by its node)` : `${s.parent.thread} @ ${s.parent.seq}`) : "";
    const fork = s.fork ? cairn.orSealed(s.fork, (f) => `${f.thread} @ ${f.seq}`) : "";
    kv($("summary"), [
      ["status", badge(s.status)],
      ["workflow", wf],
      ["step / seq", `${s.step} / ${s.seq}`],
      ["next", (s.frontier || []).join(", ")],
      ["waiting", waiting],
      ["progress", progressBar(s)],
      ["labels", labels(s.labels)],
      // The worker build the thread is pinned to (`cairn.build`; Repin and Unpin change it).
      ["worker build", s.labels && s.labels["cairn.build"] ? el("span", { id: "build", class: "mono" }, s.labels["cairn.build"]) : ""],
      ["created", `${time(s.created_at_ms)} (${age(Date.now() - s.created_at_ms)} ago)`],
      ["updated", `${time(s.updated_at_ms)} (${age(Date.now() - s.updated_at_ms)} ago)`],
      ["parent", parent],
      ["sub-workflow of", s.labels && s.labels.parent
        ? el("a", { id: "parent-thread", href: `/ui/threads/${encodeURIComponent(s.labels.parent)}` }, s.labels.parent) : ""],
      ["forked from", fork],
      // Continue-as-new: the thread this one continues, and the successor it continued as.
      ["continued from", link("continued-from", s.continued_from)],
      ["continued as", link("continued-as", s.continued_as)],
      ["lease", s.lease ? `${s.lease.owner || JSON.stringify(s.lease)}` : ""],
      ["locks", (s.locks || []).map((l) => l.name).join(", ")],
      ["output", s.output === null || s.output === undefined ? "" : cairn.orSealed(s.output, output)],
      ["last error", cairn.sealed(s.last_error) ? cairn.encrypted(s.last_error) : ""],
    ]);
    const problems = [];
    if (s.last_error && !cairn.sealed(s.last_error)) {
      problems.push(el("div", { class: "alert", id: "last-error" },
        el("strong", {}, `Last error (seq ${s.last_error.seq}, ${s.last_error.task}): `), s.last_error.error));
    }
    if (s.status_reason && (!s.last_error || cairn.sealed(s.last_error) || !String(s.last_error.error).includes(s.status_reason))) {
      problems.push(el("div", { class: "alert", id: "divergence" }, el("strong", {}, "Why it stopped (a diverging replay, a blocked resume): "), s.status_reason));
    }
    if (s.state_unknown) problems.push(el("div", { class: "alert", id: "state-unknown" }, el("strong", {}, "State unknown: "), s.state_unknown));
    $("problem").replaceChildren(...problems);
    const budgets = cairn.sealed(s.budgets) ? [cairn.encrypted(s.budgets)] : Object.entries(s.budgets || {}).map(([name, b]) => {
      const used = b.used;
      const limit = b.limit;
      const pct = limit ? Math.min(100, Math.round((100 * used) / limit)) : 0;
      const shown = name === "wall_ms" ? duration(used) : used;
      const lim = limit === null || limit === undefined ? "no limit" : (name === "wall_ms" ? duration(limit) : limit);
      return el("div", { class: "budget", "data-budget": name },
        el("span", {}, name.replace("_", " ")),
        el("span", { class: `progress${pct >= 100 ? " over" : ""}` }, el("span", { style: `width:${limit ? pct : 0}%` })),
        el("span", { class: "muted" }, `${shown} / ${lim}`));
    });
    $("budgets").replaceChildren(...budgets);
    const t = s.telemetry || {};
    kv($("usage"), cairn.sealed(t) ? [["telemetry", cairn.encrypted(t)]] : [
      ["tool calls", t.tool_calls],
      ["retries", t.retries],
      ["errors", t.errors],
      ["tokens", t.tokens],
      ["cost", t.cost_micros !== undefined ? `${(t.cost_micros / 1e6).toFixed(4)}` : ""],
      ["checkpoints", t.checkpoints],
      ["time in nodes", Object.entries(t.node_ms || {}).map(([n, ms]) => `${n} ${duration(ms)}`).join(", ")],
    ]);
    // Only the controls the thread's status accepts are shown: a finished thread refuses pause,
    // resume, cancel, input and repin (the engine would answer 409), and is only forked or reset.
    const st = s.status;
    const finished = TERMINAL.has(st);
    $("pause").hidden = finished || st === "paused";
    $("resume").hidden = st !== "paused" && st !== "blocked";
    $("cancel").hidden = finished;
    $("input").hidden = $("input-value").hidden = $("input-sep").hidden = st !== "waiting_input";
    $("repin").hidden = $("unpin").hidden = $("repin-build").hidden = $("repin-sep").hidden = finished;
    $("finished-note").hidden = !finished;
    if (finished) $("finished-note").textContent = `${st.replace("_", " ")}: nothing to pause, resume or cancel; fork or reset it to run it again`;
    if (!$("fork-at").value) $("fork-at").placeholder = String(s.seq);
    // The updates the thread's workflow declares, suggested in the update form.
    const names = s.updates || [];
    $("update-names").replaceChildren(...names.map((n) => el("option", { value: n })));
    const name = document.querySelector("form[data-send=update] input[name=name]");
    if (name) name.placeholder = names.length ? `update name (${names.join(", ")})` : "update name (the workflow declares none)";
  }

  /** What a parked thread waits for: a timer, a promise (its completion is a signal of the
   *  engine's own name), a signal, or input. */
  function waitingText(w) {
    const node = w.task.node;
    if (w.type === "timer") return `timer for ${node} until ${time(w.until_ms)}`;
    if (w.type === "signal") {
      return w.name.startsWith("cairn.promise.") ? `a promise's completion for ${node} (see Promises)` : `signal "${w.name}" for ${node}`;
    }
    return `input for ${node}: ${JSON.stringify(w.prompt)}`;
  }

  /** A thread's output: pretty-printed whole, folded when long (`cairn.foldedJson`). */
  const output = (value) => cairn.foldedJson(value, { id: "output" });

  async function loadSummary() {
    renderSummary(await api(`/api/threads/${enc}`));
  }

  // ---- graph ----
  async function loadGraph() {
    const svg = await text(`/api/threads/${enc}/graph.svg`);
    $("graph").innerHTML = svg; // the endpoint's own SVG: every name in it is escaped
  }

  // ---- timeline ----
  async function loadTimeline() {
    const t = await api(`/api/threads/${enc}/timeline?last=${TL_WINDOW}${tlTo === null ? "" : `&to=${tlTo}`}`);
    const box = $("timeline");
    box.dataset.from = t.from_seq;
    box.dataset.to = t.to_seq;
    $("tl-window").textContent = `seq ${t.from_seq}–${t.to_seq} of ${summary ? summary.first_seq : 1}–${t.last_seq}`;
    $("tl-earlier").disabled = t.earlier === null;
    $("tl-earlier").dataset.to = t.earlier ?? "";
    $("tl-later").disabled = t.later === null;
    $("tl-later").dataset.to = t.later ?? "";
    $("tl-latest").disabled = tlTo === null;
    const items = [];
    for (const r of t.runs) items.push({ kind: "run", start: r.start_ms, end: r.end_ms, r });
    for (const w of t.waits) items.push({ kind: "wait", start: w.start_ms, end: w.end_ms, r: w });
    const now = Date.now();
    const starts = items.map((i) => i.start).filter((x) => x !== null);
    const ends = items.map((i) => i.end ?? now);
    const lo = Math.min(...starts, ...ends);
    const hi = Math.max(...ends, lo + 1);
    const pos = (x) => ((x - lo) * 100) / (hi - lo);
    const shown = items.slice(-300);
    $("timeline-note").textContent = `${t.runs.length} runs, ${t.waits.length} waits` +
      (t.whole ? "" : ` in seq ${t.from_seq}–${t.to_seq}`) +
      (shown.length < items.length ? `, the last ${shown.length} shown` : "");
    const out = shown.map(({ kind, start, end, r }) => {
      const s = start ?? lo;
      const e = end ?? now;
      const left = pos(s);
      const width = Math.max(0.3, pos(e) - left);
      if (kind === "wait") {
        return el("div", { class: "tl-row wait", "data-task": r.task, title: `${r.task} waits for ${r.kind}` },
          el("span", { class: "name", title: `${r.task} waits for ${r.kind}` }, `${r.task}`, el("span", { class: "muted" }, ` waits for ${r.kind}`)),
          el("span", { class: "tl-track" }, el("span", { class: "tl-bar wait", style: `left:${left}%;width:${width}%`, title: `waiting for ${r.kind}` })),
          el("span", { class: "dur" }, end ? duration(e - s) : "waiting"));
      }
      const tools = (r.tools || []).map((tc) => el("span", {
        class: "tl-tool", title: `tool ${tc.name} #${tc.call}${tc.ok === false ? " (error)" : ""}`,
        style: `left:${pos(tc.start_ms)}%;width:${Math.max(0.2, pos(tc.end_ms ?? now) - pos(tc.start_ms))}%`,
      }));
      const notes = [];
      if (r.attempt > 1) notes.push(`attempt ${r.attempt}`);
      if (r.retry_delay_ms !== undefined) notes.push(`retry in ${duration(r.retry_delay_ms)}`);
      if (r.tools && r.tools.length) notes.push(`${r.tools.length} tool call${r.tools.length > 1 ? "s" : ""}`);
      const title = `${r.task} step ${r.step}: ${r.status}${notes.length ? ` (${notes.join(", ")})` : ""}${r.error ? ` — ${r.error}` : ""}`;
      const child = r.child ? el("a", { class: "child", href: `/ui/threads/${encodeURIComponent(r.child)}`, title: `child thread ${r.child}` }, " ↳ child thread") : "";
      return el("div", { class: `tl-row run ${r.status}`, "data-task": r.task, title },
        el("span", { class: "name", title }, `${r.task}`, el("span", { class: "muted" }, ` #${r.step}${notes.length ? ` · ${notes.join(" · ")}` : ""}`), child),
        el("span", { class: "tl-track" }, el("span", { class: `tl-bar ${r.status}`, style: `left:${left}%;width:${width}%` }), ...tools),
        el("span", { class: "dur" }, end ? duration(e - s) : r.status));
    });
    if (!out.length) out.push(el("p", { class: "empty" }, t.whole ? "No node has run yet." : "No node ran in this window."));
    const stick = box.scrollTop === 0 || box.scrollTop + box.clientHeight >= box.scrollHeight - 30;
    box.replaceChildren(...out);
    if (stick) box.scrollTop = box.scrollHeight; // the newest runs in view
  }

  // ---- events (windowed) ----
  function summaryOf(e) {
    const b = e.body || {};
    const bits = [];
    if (b.task) bits.push(b.task.item !== undefined ? `${b.task.node}[${b.task.item}]` : b.task.node);
    if (e.summary) bits.push(e.summary);
    else if (b.type === "status_changed") bits.push(`${b.from} → ${b.to}${b.reason ? `: ${b.reason}` : ""}`);
    else if (b.type === "tool_called" || b.type === "tool_returned") bits.push(`${b.name} #${b.call}`);
    else if (b.type === "node_failed") bits.push(JSON.stringify(b.error));
    return bits.join(" · ");
  }

  function row(e) {
    const b = e.body || {};
    const corr = b.message && b.message.correlation_id;
    const sealed = cairn.sealed(e.body);
    return el("tr", { "data-seq": e.seq, "data-kind": e.kind, onclick: () => select(e.seq) },
      el("td", { class: "seq" }, e.seq),
      el("td", { class: "kind" }, e.kind),
      el("td", { class: "sum" }, summaryOf(e), sealed ? " " : "", sealed ? cairn.encrypted(sealed) : "",
        corr ? el("a", { href: `/ui/messages/${encodeURIComponent(corr)}`, onclick: (ev) => ev.stopPropagation() }, ` ✉ ${corr}`) : ""),
      el("td", { class: "muted", title: time(e.at_ms) }, time(e.at_ms).slice(11)));
  }

  function renderWindow() {
    const first = summary ? summary.first_seq : 1;
    const last = summary ? Math.max(summary.last_seq || 0, rows.length ? rows[rows.length - 1].seq : 0) : 0;
    const lo = rows.length ? rows[0].seq : 0;
    const hi = rows.length ? rows[rows.length - 1].seq : 0;
    $("window").textContent = rows.length ? `seq ${lo}–${hi} of ${first}–${last}` : "no events";
    $("older").disabled = !rows.length || lo <= first;
    $("latest").disabled = atLatest;
  }

  async function loadLatest() {
    await loadSummary();
    const last = summary.last_seq || 0;
    const since = Math.max(summary.first_seq - 1, last - WINDOW, 0);
    const page = await api(`/api/threads/${enc}/events?since=${since}&limit=${WINDOW}`);
    rows = page.events;
    atLatest = true;
    $("events").replaceChildren(...rows.map(row));
    const log = $("log");
    log.scrollTop = log.scrollHeight;
    renderWindow();
    follow();
  }

  async function loadOlder() {
    if (!rows.length) return;
    const lo = rows[0].seq;
    const since = Math.max(summary.first_seq - 1, lo - 1 - WINDOW, 0);
    const limit = lo - 1 - since;
    if (limit <= 0) return;
    const page = await api(`/api/threads/${enc}/events?since=${since}&limit=${limit}`);
    const older = page.events.filter((e) => e.seq < lo);
    const log = $("log");
    const before = log.scrollHeight;
    rows = older.concat(rows);
    $("events").prepend(...older.map(row));
    if (rows.length > MAX_ROWS) {
      // Bounded: the newest rows go; the page is no longer at the latest event.
      const drop = rows.length - MAX_ROWS;
      rows = rows.slice(0, MAX_ROWS);
      const body = $("events");
      for (let i = 0; i < drop; i++) body.lastElementChild.remove();
      atLatest = false;
    }
    log.scrollTop += log.scrollHeight - before;
    renderWindow();
  }

  function append(e) {
    if (rows.length && e.seq <= rows[rows.length - 1].seq) return;
    if (!atLatest) { renderWindow(); return; }
    const log = $("log");
    const stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 30;
    rows.push(e);
    const r = row(e);
    r.classList.add("fresh");
    $("events").append(r);
    if (rows.length > MAX_ROWS) {
      rows.shift();
      $("events").firstElementChild.remove();
    }
    if (stick) log.scrollTop = log.scrollHeight;
    if (summary && e.seq > (summary.last_seq || 0)) summary.last_seq = e.seq;
    renderWindow();
    dirty = true;
  }

  function follow() {
    if (source) { source.close(); source = null; }
    if (!$("follow").checked) { setLive(false, "not following"); return; }
    if (summary && TERMINAL.has(summary.status)) { setLive(true, `ended: ${summary.status}`); }
    const since = rows.length ? rows[rows.length - 1].seq : (summary ? summary.last_seq || 0 : 0);
    const es = new EventSource(`/api/threads/${enc}/events?follow=1&since=${since}`);
    source = es;
    es.onopen = () => setLive(true, "following live");
    es.addEventListener("event", (m) => {
      try { append(JSON.parse(m.data)); } catch (err) { $("error").textContent = String(err); }
    });
    es.addEventListener("error", () => {
      // The stream ends with the thread (or the endpoint stopped): no automatic reconnect from
      // a stale bookmark; read again and follow from where the page is, unless it ended.
      es.close();
      if (source !== es) return;
      source = null;
      setTimeout(async () => {
        try { await loadSummary(); } catch (_) { setLive(false, "disconnected"); return; }
        if (TERMINAL.has(summary.status)) { dirty = true; setLive(true, `ended: ${summary.status}`); return; }
        if ($("follow").checked && !source) follow();
      }, 1000);
    });
  }

  // ---- state at a seq, diff to the previous one ----
  async function select(seq) {
    selected = seq;
    for (const r of $("events").querySelectorAll("tr.sel")) r.classList.remove("sel");
    const r = $("events").querySelector(`tr[data-seq="${seq}"]`);
    if (r) r.classList.add("sel");
    $("state-seq").value = String(seq);
    $("fork-at").value = String(seq);
    try {
      const st = await api(`/api/threads/${enc}/state?at=${seq}`);
      $("state-at").textContent = st.step === undefined ? `after seq ${st.seq} (step and status sealed)` : `after seq ${st.seq} (step ${st.step}, ${st.status})`;
      const sealedState = cairn.sealed(st.state);
      if (sealedState) $("state").replaceChildren(cairn.encrypted(sealedState));
      else $("state").textContent = JSON.stringify(st.state, null, 2);
      const first = summary ? summary.first_seq : 1;
      if (sealedState) {
        $("diff").replaceChildren(el("li", { class: "muted" }, "the states are sealed: no diff without the key"));
      } else if (seq > first) {
        const d = await api(`/api/threads/${enc}/state?diff=${seq - 1},${seq}`);
        const items = d.changes.map((c) => {
          if (c.before === undefined || c.before === null) return el("li", { class: "add" }, `+ ${c.path || "/"} = ${JSON.stringify(c.after)}`);
          if (c.after === undefined || c.after === null) return el("li", { class: "del" }, `− ${c.path || "/"} (was ${JSON.stringify(c.before)})`);
          return el("li", { class: "chg" }, `~ ${c.path || "/"}: ${JSON.stringify(c.before)} → ${JSON.stringify(c.after)}`);
        });
        $("diff").replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "no change to the state")]));
      } else {
        $("diff").replaceChildren(el("li", { class: "muted" }, "the first event: no previous state"));
      }
    } catch (e) {
      $("state").textContent = String(e.message || e);
      $("diff").replaceChildren();
    }
  }

  // ---- checkpoints ----
  async function loadCheckpoints() {
    const c = await api(`/api/threads/${enc}/checkpoints`);
    if (!c.checkpoints.length) { $("checkpoints").replaceChildren(el("p", { class: "empty" }, "No checkpoint.")); return; }
    const t = el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["id", "kind", "covers seq", "created", "size", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, c.checkpoints.slice().sort((a, b) => b.covers.seq - a.covers.seq).slice(0, 200).map((cp) => el("tr", { "data-checkpoint": cp.id },
        el("td", {}, cp.id), el("td", {}, cp.kind), el("td", {}, cp.covers.seq),
        el("td", {}, time(cp.created_at_ms)), el("td", {}, `${cp.snapshot_len} B`),
        el("td", {}, el("button", { class: "b", type: "button", onclick: () => select(cp.covers.seq) }, "state"))))));
    $("checkpoints").replaceChildren(t);
    $("checkpoints-note").textContent = `${c.checkpoints.length}, newest first`;
  }

  // ---- published events and promises ----
  /** A published or completed value in a table cell: its JSON on one line when short, else
   *  folded whole (`cairn.foldedJson`). */
  function cell(value) {
    const flat = JSON.stringify(value) ?? String(value);
    return flat.length <= 160 ? el("code", { class: "mono" }, flat) : cairn.foldedJson(value, {}, 6, 300);
  }

  async function loadPublished() {
    const p = await api(`/api/threads/${enc}/published`);
    const keys = Object.keys(p.published || {});
    $("published-note").textContent = keys.length ? `${keys.length} key${keys.length > 1 ? "s" : ""}, latest values` : "";
    $("published").replaceChildren(keys.length ? el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, el("th", {}, "key"), el("th", {}, "latest value"))),
      el("tbody", {}, keys.map((k) => el("tr", { "data-key": k },
        el("td", { class: "mono" }, k), el("td", {}, cell(p.published[k]))))))
      : el("p", { class: "empty" }, "Nothing published (ctx.set_event)."));
  }

  async function loadPromises() {
    const p = await api(`/api/threads/${enc}/promises`);
    const open = p.promises.filter((x) => x.state === "open");
    $("promises-note").textContent = p.promises.length ? `${open.length} open of ${p.promises.length}` : "";
    $("open-promises").replaceChildren(...open.map((x) => el("option", { value: x.promise })));
    const outcome = (x) => (x.state === "open" ? ""
      : ("error" in x ? el("span", { class: "error" }, `error: ${x.error}`) : cell(x.value)));
    const pick = (x) => el("button", { class: "b", type: "button", onclick: () => {
      const f = document.querySelector("form[data-send=promise] input[name=promise]");
      f.value = x.promise;
      f.dispatchEvent(new Event("input", { bubbles: true }));
      f.closest("form").scrollIntoView({ block: "nearest" });
    } }, "complete…");
    $("promises").replaceChildren(p.promises.length ? el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ["promise", "state", "completed with", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, p.promises.map((x) => el("tr", { "data-promise": x.promise, "data-state": x.state },
        el("td", { class: "mono" }, x.promise), el("td", {}, el("span", { class: `badge s-${x.state === "open" ? "waiting_input" : "completed"}` }, x.state)),
        el("td", {}, outcome(x)), el("td", {}, x.state === "open" ? pick(x) : "")))))
      : el("p", { class: "empty" }, "No promise (ctx.promise)."));
  }

  // ---- controls ----
  const hasToken = cairn.tokenField("controls");
  async function act(name, body) {
    const out = $("control-result");
    if (!hasToken(out)) return;
    out.className = "muted";
    out.textContent = `${name}…`;
    try {
      const r = await cairn.control(id, name, body);
      out.className = "";
      const to = (t) => el("a", { id: `${name}-link`, href: `/ui/threads/${encodeURIComponent(t)}` }, t);
      if (name === "fork") {
        out.replaceChildren(`forked: `, to(r.thread), ` (${r.status})`);
      } else if (name === "reset") {
        out.replaceChildren(`reset: the new thread is `, to(r.thread), ` (${r.status}); this one is cancelled unless it had ended`);
      } else if (name === "repin") {
        out.textContent = body.build === null ? `unpinned: ${r.status}` : `pinned to build ${body.build}: ${r.status}`;
      } else {
        out.textContent = `${name}: ${r.status}`;
      }
      await loadSummary();
      dirty = true;
    } catch (e) {
      out.className = "error";
      out.textContent = cairn.failure(e);
    }
  }
  $("pause").addEventListener("click", () => act("pause"));
  $("resume").addEventListener("click", () => act("resume"));
  $("cancel").addEventListener("click", () => {
    if (confirm(`Cancel thread ${id}?`)) act("cancel", { reason: "cancelled from the web view" });
  });
  $("input").addEventListener("click", () => {
    const raw = $("input-value").value;
    let value;
    try { value = JSON.parse(raw); } catch (_) { value = raw; }
    act("input", { value });
  });
  $("fork").addEventListener("click", () => {
    const at = Number($("fork-at").value || (summary && summary.seq));
    act("fork", { at });
  });
  // Reset: to the start, the latest checkpoint, or a seq (the number field shows for it).
  $("reset-to").addEventListener("change", () => { $("reset-seq").hidden = $("reset-to").value !== "seq"; });
  $("reset").addEventListener("click", () => {
    const point = $("reset-to").value;
    const to = point === "seq" ? `seq:${$("reset-seq").value.trim()}` : point;
    if (confirm(`Reset thread ${id} to ${to}? It is cancelled and goes on in a new thread.`)) act("reset", { to });
  });
  // Repin: to the build typed in; Unpin: any engine takes the thread.
  $("repin").addEventListener("click", () => act("repin", { build: $("repin-build").value.trim() }));
  $("unpin").addEventListener("click", () => act("repin", { build: null }));
  // Sends: a signal, an update, a promise's completion (forms of `cairnSend.form`'s shape).
  // After a send the summary, published events and promises are read again, and the panels
  // follow the events it causes.
  const sent = () => {
    dirty = true;
    loadSummary().catch(() => {});
    loadTalk();
  };
  $("sends").append(cairnSend.signal(id, hasToken, sent), cairnSend.update(id, hasToken, sent), cairnSend.promise(hasToken, sent));
  $("older").addEventListener("click", () => loadOlder().catch((e) => { $("error").textContent = String(e.message || e); }));
  $("latest").addEventListener("click", () => loadLatest().catch((e) => { $("error").textContent = String(e.message || e); }));
  $("follow").addEventListener("change", follow);
  const showTimeline = (to) => {
    tlTo = to;
    loadTimeline().catch((e) => { $("timeline").replaceChildren(cairn.failed(e)); });
  };
  $("tl-earlier").addEventListener("click", () => showTimeline(Number($("tl-earlier").dataset.to)));
  $("tl-later").addEventListener("click", () => {
    const to = Number($("tl-later").dataset.to);
    showTimeline(summary && to >= (summary.last_seq || 0) ? null : to);
  });
  $("tl-latest").addEventListener("click", () => showTimeline(null));
  $("tl-go").addEventListener("click", () => {
    const to = Number($("tl-to").value);
    if (to >= 1) showTimeline(to);
  });
  $("state-go").addEventListener("click", () => select(Number($("state-seq").value)));
  $("graph").addEventListener("click", (ev) => {
    const g = ev.target.closest && ev.target.closest("g.node");
    if (!g) return;
    // The node's latest event in the window.
    const node = g.getAttribute("data-node");
    const hit = [...rows].reverse().find((e) => e.node === node || (e.body && e.body.task && e.body.task.node === node));
    if (hit) { select(hit.seq); const r = $("events").querySelector(`tr[data-seq="${hit.seq}"]`); if (r) r.scrollIntoView({ block: "center" }); }
  });

  /** The published events and promises, read again; a failure shows in their panel. */
  function loadTalk() {
    const fail = (box) => (e) => { $(box).replaceChildren(cairn.failed(e)); };
    return Promise.all([loadPublished().catch(fail("published")), loadPromises().catch(fail("promises"))]);
  }

  // Refreshes of the derived panels, at most once a second while events arrive.
  async function refreshPanels() {
    await Promise.all([
      loadSummary().catch((e) => { $("error").textContent = String(e.message || e); }),
      loadGraph().catch((e) => { $("graph").replaceChildren(el("p", { class: "error" }, String(e.message || e))); }),
      loadTimeline().catch((e) => { $("timeline").replaceChildren(cairn.failed(e)); }),
      loadCheckpoints().catch((e) => { $("checkpoints").replaceChildren(el("p", { class: "error" }, String(e.message || e))); }),
      loadTalk(),
    ]);
  }
  setInterval(async () => {
    if (!dirty || document.hidden) return;
    dirty = false;
    await refreshPanels();
    renderWindow();
  }, 1000);

  (async () => {
    try {
      await loadLatest();
      await refreshPanels();
      if (rows.length) await select(rows[rows.length - 1].seq);
      renderWindow();
      document.body.dataset.loaded = "1";
    } catch (e) {
      $("error").textContent = String(e.message || e);
      setLive(false, "error");
    }
  })();
})();
