// Cairn web view: helpers shared by the pages. Plain browser JavaScript, no library, no network
// but this endpoint.
"use strict";

const cairn = (() => {
  /** GET a JSON route; throws an Error with the endpoint's message on a 4xx/5xx. */
  async function api(path) {
    const resp = await fetch(path, { headers: withToken({ accept: "application/json" }) });
    const text = await resp.text();
    let body;
    try { body = JSON.parse(text); } catch (_) { body = text; }
    if (!resp.ok) {
      const why = body && body.error ? body.error + (body.field ? ` (${body.field})` : "") : text;
      // A value sealed at rest that the endpoint holds no key for (docs/encryption.md).
      if (resp.status === 409 && body && /^sealed with key /.test(body.error || "")) {
        const err = new Error(`encrypted: ${why} (serve with CAIRN_KEYS to read it)`);
        const m = /^sealed with key (\S+) \(codec ([^)]+)\)/.exec(body.error);
        if (m) err.sealed = { encrypted: true, key: m[1], codec: m[2] };
        throw err;
      }
      throw new Error(`${resp.status}: ${why}`);
    }
    return body;
  }

  /** GET a route as text (SVG pictures). */
  async function text(path) {
    const resp = await fetch(path, { headers: withToken({}) });
    const t = await resp.text();
    if (!resp.ok) {
      let why = t;
      try { why = JSON.parse(t).error; } catch (_) { /* not JSON */ }
      throw new Error(`${resp.status}: ${why}`);
    }
    return t;
  }

  /** An element: el("td", {class: "x", onclick: f}, "text", child, ...). */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "class") e.className = v;
      else if (k === "style") e.style.cssText = v;
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function badge(status) {
    return el("span", { class: `badge s-${status}`, "data-status": status }, String(status).replace("_", " "));
  }

  /** "3 s", "4 min", "2 h", "5 d". */
  function age(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.round(s / 60)} min`;
    if (s < 86400) return `${Math.round(s / 3600)} h`;
    return `${Math.round(s / 86400)} d`;
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "";
    if (ms < 1000) return `${ms} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
    return age(ms);
  }

  function time(ms) {
    if (!ms) return "";
    const d = new Date(ms);
    return d.toISOString().replace("T", " ").replace("Z", "").slice(0, 23);
  }

  /** A thread's progress (`t`: a thread row or details): its bar, full once the thread has
   *  completed, and the text the engine words for it (`progress_text`, as the CLI prints it). */
  function progressBar(t) {
    const p = t.progress;
    if (!p || !p.total) return "";
    const frac = t.status === "completed" ? 1 : p.percent !== null && p.percent !== undefined
      ? (p.step - 1 + p.percent / 100) / p.total : p.step / p.total;
    const pct = Math.max(0, Math.min(100, Math.round(100 * frac)));
    return el("span", { class: "progress-wrap", title: p.message || "" },
      el("span", { class: "progress" }, el("span", { style: `width:${pct}%` })),
      el("span", { class: "progress-text" }, t.progress_text || ""));
  }

  function labels(map) {
    return Object.entries(map || {}).map(([k, v]) => el("span", { class: "label" }, `${k}=${v}`));
  }

  // The control token: never in a page. Taken once from the address's fragment (#token=...),
  // which the browser does not send, or asked for; kept in this tab's sessionStorage.
  const TOKEN_KEY = "cairn.token";
  function adoptTokenFromFragment() {
    const m = /(?:^#|&)token=([0-9a-fA-F]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem(TOKEN_KEY, m[1]);
      history.replaceState(null, "", location.pathname + location.search);
    }
  }
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
  /** `headers` with the token when this tab has one: a public endpoint's reads need it. */
  function withToken(headers) {
    const t = token();
    return t ? Object.assign(headers, { authorization: `Bearer ${t}` }) : headers;
  }
  function setToken(t) {
    if (t) sessionStorage.setItem(TOKEN_KEY, t.trim());
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  /** POST a control with the token; resolves to the JSON answer, throws with the error. */
  function control(thread, name, body) {
    return send("POST", `/api/threads/${encodeURIComponent(thread)}/${name}`, body);
  }

  /** A control request (`POST`, `DELETE`) with the token; resolves to the JSON answer, throws
   *  an Error with `status` and the endpoint's message. */
  async function send(method, path, body) {
    const resp = await fetch(path, {
      method,
      headers: { "content-type": "application/json", authorization: `Bearer ${token()}` },
      body: body === undefined ? "" : JSON.stringify(body),
    });
    const t = await resp.text();
    let out;
    try { out = JSON.parse(t); } catch (_) { out = { error: t }; }
    if (!resp.ok) {
      const e = new Error(`${resp.status}: ${out.error}${out.field ? ` (${out.field})` : ""}`);
      e.status = resp.status;
      throw e;
    }
    return out;
  }

  function setLive(on, text) {
    const l = document.getElementById("live");
    if (!l) return;
    l.className = `live ${on ? "on" : "off"}`;
    l.textContent = text;
  }

  /** Runs `render` (async: reads and draws) now, every `ms` while the tab is visible, and when
   *  the tab comes back into view; one run at a time. A run that throws shows its message in
   *  `#error` and marks the page disconnected; one that succeeds clears it, marks the page live
   *  and sets `body[data-loaded]`. Returns a function that runs it now (after a control; if a
   *  run is under way, once more after it). */
  function poll(render, ms) {
    let inflight = null;
    let again = false;
    async function run() {
      if (inflight) {
        again = true;
        return inflight;
      }
      inflight = once();
      await inflight;
      inflight = null;
      if (again) {
        again = false;
        await run();
      }
    }
    async function once() {
      const error = document.getElementById("error");
      try {
        await render();
        if (error) error.textContent = "";
        setLive(true, "live");
        document.body.dataset.loaded = "1";
      } catch (e) {
        if (error) error.textContent = String(e.message || e);
        setLive(false, "disconnected");
      }
    }
    const visible = () => document.visibilityState === "visible";
    setInterval(() => { if (visible()) run(); }, ms);
    document.addEventListener("visibilitychange", () => { if (visible()) run(); });
    run();
    return run;
  }

  /** Wires a page's token field (`#token`, `#token-save`, `#token-state`). Returns a check
   *  for a control: true when the tab has a token, else it says so in `out` and focuses the
   *  field. */
  function tokenField(needs) {
    const $ = (id) => document.getElementById(id);
    const show = () => { $("token-state").textContent = token() ? "token set for this tab" : `no token: ${needs} need it`; };
    $("token-save").addEventListener("click", () => { setToken($("token").value); $("token").value = ""; show(); });
    $("token").addEventListener("keydown", (e) => { if (e.key === "Enter") $("token-save").click(); });
    show();
    return (out) => {
      if (token()) return true;
      out.classList.remove("muted");
      out.classList.add("error");
      out.textContent = "Paste the control token first (the file <database>.token beside the database, printed by cairn serve).";
      $("token").focus();
      return false;
    };
  }

  /** A failed control's message: a 401 says where the token is. */
  function failure(e) {
    return e.status === 401 ? "401: the token is wrong or missing (see <database>.token)." : String(e.message || e);
  }

  /** A JSON value for a person: pretty-printed whole (never cut), folded in a `<details>` when
   *  longer than `lines` lines or `chars` characters (a long string is one line), its summary
   *  saying what it holds (keys, items, size) without quoting a cut piece of it. */
  function foldedJson(value, attrs, lines = 12, chars = 800) {
    const pretty = JSON.stringify(value, null, 2) ?? String(value);
    const n = pretty.split("\n").length;
    const plural = (k, word) => `${k} ${word}${k === 1 ? "" : "s"}`;
    let shape;
    if (Array.isArray(value)) shape = `[ ${plural(value.length, "item")} ]`;
    else if (value && typeof value === "object") {
      const keys = Object.keys(value);
      const named = keys.slice(0, 6).join(", ") + (keys.length > 6 ? `, and ${keys.length - 6} more` : "");
      shape = `{ ${named} }`;
    } else if (typeof value === "string") shape = `a string of ${plural(value.length, "character")}`;
    else shape = pretty;
    const size = n > 1 ? ` · ${plural(n, "line")}, ${plural(pretty.length, "character")}` : "";
    return el("details", Object.assign({ class: "json-fold", open: n <= lines && pretty.length <= chars }, attrs || {}),
      el("summary", { class: "mono" }, shape + size),
      el("pre", { class: "json" }, pretty));
  }

  adoptTokenFromFragment();
  /** The placeholder of a value sealed with a key the endpoint lacks
   *  (`{"encrypted": true, "codec", "key"}`, docs/encryption.md), or null. */
  function sealed(v) {
    return v && typeof v === "object" && v.encrypted === true && typeof v.key === "string" ? v : null;
  }

  /** What stands for a sealed value: "encrypted", naming its key. */
  function encrypted(p) {
    return el("span", { class: "encrypted", "data-encrypted": p.key, title: `sealed with key ${p.key} (codec ${p.codec}): serve with CAIRN_KEYS to read it` },
      `encrypted (key ${p.key})`);
  }

  /** What a panel whose read failed shows: "encrypted" naming the key for a read of values
   *  sealed with a key the endpoint lacks (the panel is folded from them), else the error. */
  function failed(e) {
    if (e && e.sealed) return el("p", { class: "muted" }, encrypted(e.sealed), " folded from values sealed with this key");
    return el("p", { class: "error" }, String((e && e.message) || e));
  }

  /** `v` shown by `show`, or "encrypted" when sealed. */
  function orSealed(v, show) {
    const p = sealed(v);
    return p ? encrypted(p) : show(v);
  }

  return {
    api, text, el, badge, age, duration, time, progressBar, labels, token, setToken, control, send,
    setLive, poll, tokenField, failure, foldedJson, sealed, encrypted, orSealed, failed,
  };
})();
